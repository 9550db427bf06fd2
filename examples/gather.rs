//! Large data: the crate's minibatch step beside the random-gather limit and a plain-Rust step,
//! in f64 and with the data stored in f32.
//!
//! For each setting (N, d, n) of `support/gather.rs` it times, alternating in rounds on one
//! thread: one SGLD step of the crate on the built-in logistic regression (f64 data, then f32
//! data), the plain-Rust SGLD step a user would write, and the gather probe (the same minibatch
//! draw and a prefetching sum of the drawn rows: the least any step must do; compiled for each
//! instruction set the processor has, as the crate's row kernels are, the fastest counting). It
//! prints the
//! medians as ratios measured in this run (absolute times depend on the machine) and writes them
//! to `docs/performance.md`.
//!
//! Run with `cargo run --release --example gather` (about a minute; the N = 10⁷ setting needs
//! 2.5 GB of memory). For your own processor: `RUSTFLAGS="-C target-cpu=native" cargo run
//! --release --example gather`. The last line of stdout is `RESULT {json}`.

#[path = "support/gather.rs"]
mod gather;

use gather::{DATA_SEED, Isa, PRIOR_VAR, SETTINGS, gather_probe, gather_probe_scalar, plain_sgld_step};
use sgmcmc::rng::stream;
use sgmcmc::{LogisticRegression, Minibatch, Model, Sampler, Sgld, SgldSettings, StepSize, Subsample};
use std::hint::black_box;
use std::time::Instant;

/// Alternating rounds per setting; the median round is reported.
const ROUNDS: usize = 7;
/// Wall time per variant and round, about.
const ROUND_SECONDS: f64 = 0.15;

/// One row of the table: per-step times in seconds.
struct Row {
    label: String,
    step64: f64,
    step32: f64,
    plain: f64,
    probe64: f64,
    probe32: f64,
    scalar64: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), sgmcmc::Error> {
    let mut rows = Vec::new();
    for s in &SETTINGS {
        let t_build = Instant::now();
        let m64 = LogisticRegression::synthetic(s.n_data, s.dim, PRIOR_VAR, DATA_SEED)?;
        let m32 = m64.to_f32()?;
        // At the generating parameter, close to the posterior at these N (no MAP search, which
        // costs full passes over 1.6 GB).
        let start = m64.true_theta().expect("synthetic").to_vec();
        eprintln!("N = {}, d = {}: data built in {:.1} s", s.n_data, s.dim, t_build.elapsed().as_secs_f64());
        let step = 0.1 / s.n_data as f64;
        let sampler = Sgld::new(SgldSettings { step_size: StepSize::Constant(step) }, Minibatch::new(s.batch))?;
        let (mut s64, mut s32) = (sampler.clone(), sampler);
        let (mut r64, mut r32, mut rp, mut rg) = (stream(7, &[0]), stream(7, &[1]), stream(7, &[2]), stream(7, &[3]));
        s64.init(&m64, &start, &mut r64)?;
        s32.init(&m32, &start, &mut r32)?;
        let x64 = m64.features();
        let x64 = x64.as_slice().expect("contiguous");
        let x32 = m32.features();
        let x32 = x32.as_slice().expect("contiguous");
        let mut sub = Subsample::new(s.batch, true);
        sub.prepare(s.n_data)?;
        let (mut theta, mut grad, mut acc) = (start.clone(), vec![0.0; s.dim], vec![0.0; s.dim]);
        // Variants 0–2: the crate's f64 and f32 steps, the plain step; then, for each
        // instruction set the processor has, the f64 probe, the f32 probe, the issue-form probe.
        let isas = Isa::available();
        let mut variant = |v: usize| -> Result<(), sgmcmc::Error> {
            match v {
                0 => s64.step(&m64, &mut r64),
                1 => s32.step(&m32, &mut r32),
                2 => {
                    plain_sgld_step(x64, m64.labels(), s.dim, &mut sub, &mut rp, &mut theta, &mut grad, step);
                    Ok(())
                }
                _ => {
                    let isa = isas[(v - 3) / 3];
                    black_box(match (v - 3) % 3 {
                        0 => gather_probe(isa, x64, s.dim, &mut sub, &mut rg, &mut acc),
                        1 => gather_probe(isa, x32, s.dim, &mut sub, &mut rg, &mut acc),
                        _ => gather_probe_scalar(isa, x64, s.dim, &mut sub, &mut rg),
                    });
                    Ok(())
                }
            }
        };
        let n_variants = 3 + 3 * isas.len();
        // Iterations per round from a first timing of the slowest variant (the plain step).
        let t = Instant::now();
        for _ in 0..50 {
            variant(2)?;
        }
        let iters = ((ROUND_SECONDS / (t.elapsed().as_secs_f64() / 50.0)) as usize).max(50);
        let mut times = vec![Vec::new(); n_variants];
        for _ in 0..ROUNDS {
            for (v, times) in times.iter_mut().enumerate() {
                let t = Instant::now();
                for _ in 0..iters {
                    variant(v)?;
                }
                times.push(t.elapsed().as_secs_f64() / iters as f64);
            }
        }
        let m: Vec<f64> = times.into_iter().map(median).collect();
        // The limit: the fastest compilation of each probe.
        let fastest = |k: usize| (0..isas.len()).map(|j| m[3 + 3 * j + k]).fold(f64::INFINITY, f64::min);
        let (step64, step32, plain) = (m[0], m[1], m[2]);
        let (probe64, probe32, scalar64) = (fastest(0), fastest(1), fastest(2));
        rows.push(Row {
            label: format!("N = {:e}, d = {}, n = {}", s.n_data as f64, s.dim, s.batch),
            step64,
            step32,
            plain,
            probe64,
            probe32,
            scalar64,
        });
        assert!(s64.position().iter().chain(s32.position()).all(|v| v.is_finite()), "chains stay finite");
        black_box((m64.dim(), &acc, &theta));
    }
    let mut table = String::from(
        "| setting | f64 step / gather limit | f32 step / f32 gather limit | f32 step speed-up | f32 gather limit speed-up | crate / plain-Rust step | f64 step / issue 51's probe |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let mut json = Vec::new();
    for r in &rows {
        let (a, b, c, e) = (r.probe64 / r.step64, r.probe32 / r.step32, r.step64 / r.step32, r.plain / r.step64);
        let (f, g) = (r.scalar64 / r.step64, r.probe64 / r.probe32);
        table += &format!("| {} | {a:.2} | {b:.2} | {c:.2}× | {g:.2}× | {e:.2}× faster | {f:.2} |\n", r.label);
        json.push(format!(
            "{{\"setting\":\"{}\",\"step64_us\":{:.3},\"step32_us\":{:.3},\"plain_us\":{:.3},\"probe64_us\":{:.3},\"probe32_us\":{:.3},\"scalar_probe64_us\":{:.3}}}",
            r.label,
            r.step64 * 1e6,
            r.step32 * 1e6,
            r.plain * 1e6,
            r.probe64 * 1e6,
            r.probe32 * 1e6,
            r.scalar64 * 1e6
        ));
    }
    println!("One SGLD step on logistic regression, medians of {ROUNDS} alternating rounds on one thread:");
    println!("(ratios of throughputs; the gather limit is the same minibatch draw and a prefetching sum of its rows,");
    println!(" the fastest of its compilations for {:?};", Isa::available());
    println!(" issue 51's probe sums each row into four scalar accumulators, a slower loop)\n");
    print!("{table}");
    let doc = format!(
        "# Large data: the minibatch step beside the gather limit\n\n\
         Written by `cargo run --release --example gather` (default build, one thread). Each entry is a \
         ratio of throughputs measured in one run; the gather limit draws the same minibatch and sums \
         its rows with prefetching, the least any step must do (the fastest of its compilations for the \
         instruction sets the processor has, as the crate's row kernels are compiled for AVX2 too \
         and pick one at run time). The f32 step's speed-up over the f64 step is bounded by what \
         f32 storage gains the gather itself (the f32 gather limit speed-up column: at d = 20 a row \
         of f64, 160 bytes, always spans three 64-byte cache lines and its f32 copy, 80 bytes, two, \
         so f32 storage saves at most a third of the lines a minibatch fetches: 1.5×). The last column uses the probe in the \
         form issue 51 measured (each row summed into four scalar accumulators, a slower loop). The \
         plain-Rust step and both probes are in `examples/support/gather.rs`.\n\n{table}"
    );
    if let Err(e) = std::fs::create_dir_all("docs").and_then(|_| std::fs::write("docs/performance.md", doc)) {
        eprintln!("could not write docs/performance.md: {e}");
    }
    println!("RESULT {{\"rows\":[{}]}}", json.join(","));
    Ok(())
}
