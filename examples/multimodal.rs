//! Replica-exchange SGLD and contour SGLD on multimodal posteriors with known mode weights,
//! against plain SGLD and naive swaps: the test no peer library runs.
//!
//! Run with `cargo run --release --example multimodal` (the full tables: 40 runs per method and
//! target; a few minutes on 2 cores) or `-- quick` (the reduced form CI runs: fewer iterations).
//! The SVG plot goes to `target/multimodal_weights.svg`; the last line of stdout is
//! `RESULT {json}`.
//!
//! Targets (`examples/support/multimodal.rs`; the data seeds here were not used when the
//! settings were chosen):
//! - A, the reSGLD paper's simulation: `0.4 N(−4, 0.7²) + 0.6 N(3, 0.5²)` as a finite sum of
//!   N = 1 000 terms whose minibatches of 100 see the energy with noise of sd ≈ 2 (≈ 0.3 for the
//!   gradient); the potential between the modes rises ≈ 16 above them.
//! - B, the contour-SGLD demonstration's data (Dubey et al.; BlackJAX): the mean μ of
//!   `½N(μ, 5²) + ½N(20 − μ, 5²)` from N = 1 000 data, at temperature 50 as in that
//!   demonstration (at T = 1 the barrier is 3 700 nats; at 50 it is 74): two mirror-image modes
//!   near −5 and 25, weight ½ each exactly (symmetry).
//! - C, four modes in 2-D at `(±4, ±4)` with weights 0.1, 0.2, 0.3, 0.4 (noisy finite sum as A):
//!   barriers of 20 or more between neighbours.
//!
//! Each method makes 40 independent runs (the runner's chains, one seeded stream each), all
//! started in the same mode; a run's estimate of a mode's weight is its (weighted) fraction of
//! kept draws in that mode. The table gives the mean over runs, its Monte Carlo standard error
//! (sd/√40) and `z = (mean − truth)/se` for each mode; a method passes when every |z| ≤ 3.
//! Contour SGLD is shown with its importance weights and without (its raw draws), and with the
//! exact energy (`energy_batch ≥ N`) as well as minibatch energies.

#[path = "support/multimodal.rs"]
mod multimodal;
#[path = "support/plot.rs"]
mod plot;

use multimodal::{MeanMixture, NoisyMixture, forty_runs};
use plot::{Series, linear_svg};
use sgmcmc::{
    Csgld, CsgldSettings, Minibatch, Model, ReSgld, ReSgldSettings, Result, RunOutput, RunSettings, Runner, Sampler,
    Sgld, SgldSettings, StepSize, Temperature, Tempered,
};
use std::fmt::Write as _;
use std::time::Instant;

/// Independent runs per method.
const RUNS: usize = 40;
/// A method passes when every mode's |z| is at most this.
const Z_PASS: f64 = 3.0;

/// One method's 40-run table row.
struct Row {
    target: &'static str,
    method: String,
    means: Vec<f64>,
    ses: Vec<f64>,
    zs: Vec<f64>,
    /// Each run's weight of the first mode.
    runs: Vec<f64>,
    gradients: f64,
    potentials: f64,
    secs: f64,
    note: String,
}

impl Row {
    fn passes(&self) -> bool {
        self.zs.iter().all(|z| z.abs() <= Z_PASS)
    }
}

/// Mean, its standard error, over runs.
fn mean_se(xs: &[f64]) -> (f64, f64) {
    let r = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / r;
    let v = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (r - 1.0);
    (m, (v / r).sqrt())
}

/// The table row of a run's 40 chains: each mode's weight per chain, weighted by the draws'
/// weights or not.
fn row<S: Sampler>(
    target: &'static str,
    method: impl Into<String>,
    out: &RunOutput<S>,
    mode_of: &dyn Fn(&[f64]) -> usize,
    truth: &[f64],
    weighted: bool,
    secs: f64,
) -> Result<Row> {
    let k = truth.len();
    let mut per_mode = vec![Vec::with_capacity(RUNS); k];
    for c in 0..out.estimate.n_parts() {
        let s = out.estimate.samples(c).expect("draws are stored");
        let (d, w) = (s.draws(), s.weights());
        let mut acc = vec![0.0; k];
        let mut total = 0.0;
        for (x, &wi) in d.outer_iter().zip(w.iter()) {
            let wi = if weighted { wi } else { 1.0 };
            acc[mode_of(x.as_slice().expect("rows are contiguous"))] += wi;
            total += wi;
        }
        for (m, a) in per_mode.iter_mut().zip(&acc) {
            m.push(a / total);
        }
    }
    let (mut means, mut ses, mut zs) = (Vec::new(), Vec::new(), Vec::new());
    for (m, t) in per_mode.iter().zip(truth) {
        let (mean, se) = mean_se(m);
        means.push(mean);
        ses.push(se);
        zs.push(if se > 0.0 {
            (mean - t) / se
        } else if (mean - t).abs() < 1e-12 {
            0.0
        } else {
            f64::INFINITY.copysign(mean - t)
        });
    }
    let cost = out.cost;
    let chains = out.chains.len() as f64;
    Ok(Row {
        target,
        method: method.into(),
        means,
        ses,
        zs,
        runs: per_mode[0].clone(),
        gradients: cost.datum_gradients as f64 / chains,
        potentials: cost.datum_potentials as f64 / chains,
        secs,
        note: String::new(),
    })
}

/// Runs `sampler` on `model` from `start` and times it.
fn run<M: Model + Sync + ?Sized, S: Sampler>(
    model: &M,
    sampler: &S,
    start: &[f64],
    s: RunSettings,
) -> Result<(RunOutput<S>, f64)> {
    let t = Instant::now();
    let out = Runner::new(model, sampler).start(start).settings(s).run()?;
    Ok((out, t.elapsed().as_secs_f64()))
}

/// The swap rates of chain 0, as text.
fn rates<E: sgmcmc::GradientEstimator>(out: &RunOutput<ReSgld<E>>) -> String {
    let r = out.chains[0].sampler.swap_rates();
    format!("swap rates {}", r.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(", "))
}

/// Target A: the reSGLD paper's simulation.
fn target_a(quick: bool, seed: u64, rows: &mut Vec<Row>) -> Result<()> {
    let m = NoisyMixture::resgld_paper(2);
    let (truth, _) = m.mode_weights();
    let mode_of = |x: &[f64]| m.mode_of(x);
    let n_iter = if quick { 30_000 } else { 100_000 };
    let start = [-4.0];
    let (cold, hot) = (0.002, 0.01);
    let sgld = Sgld::new(SgldSettings::constant(cold), Minibatch::new(100))?;
    let (out, t) = run(&m, &sgld, &start, forty_runs(n_iter, seed))?;
    rows.push(row("A", "SGLD", &out, &mode_of, &truth, true, t)?);
    for (label, f) in [("reSGLD, corrected swaps (F = 1)", 1.0), ("reSGLD, naive swaps", f64::INFINITY)] {
        let mut s = ReSgldSettings::new(cold, &[1.0, 10.0]);
        s.step_sizes[1] = hot;
        s.swap_every = 5;
        s.correction = f;
        let re = ReSgld::new(s, Minibatch::new(100))?;
        let (out, t) = run(&m, &re, &start, forty_runs(n_iter, seed))?;
        let mut r = row("A", label, &out, &mode_of, &truth, true, t)?;
        r.note = rates(&out);
        rows.push(r);
    }
    for (label, ne, weighted) in [
        ("CSGLD, weighted, exact energies", 1_000, true),
        ("CSGLD, unweighted, exact energies", 1_000, false),
        ("CSGLD, weighted, minibatch energies (n_e = 100)", 100, true),
    ] {
        let mut s = CsgldSettings::new(cold, 0.0, 0.5, 60);
        s.zeta = 0.75;
        s.energy_batch = ne;
        s.sa_step = StepSize::Shifted { a: 10.0, b: 1_000.0, c: 0.8 };
        let cs = Csgld::new(s, Minibatch::new(100))?;
        let (out, t) = run(&m, &cs, &start, forty_runs(2 * n_iter, seed))?;
        rows.push(row("A", label, &out, &mode_of, &truth, weighted, t)?);
    }
    Ok(())
}

/// Target B: the contour-SGLD demonstration's data at temperature 50.
fn target_b(quick: bool, seed: u64, rows: &mut Vec<Row>) -> Result<()> {
    let base = MeanMixture::demo(2);
    let t50 = Tempered::new(&base, Temperature::posterior(50.0))?;
    let mid = base.midpoint();
    let mode_of = |x: &[f64]| usize::from(x[0] >= mid);
    let truth = [0.5, 0.5];
    let n_iter = if quick { 30_000 } else { 100_000 };
    let start = [-5.0];
    let step = 0.02;
    let sgld = Sgld::new(SgldSettings::constant(step), Minibatch::new(100))?;
    let (out, t) = run(&t50, &sgld, &start, forty_runs(n_iter, seed))?;
    rows.push(row("B", "SGLD", &out, &mode_of, &truth, true, t)?);
    let ladder: Vec<f64> = (0..4).map(|i| 20f64.powf(f64::from(i) / 3.0)).collect();
    for (label, f) in [("reSGLD, corrected swaps (F = 1)", 1.0), ("reSGLD, naive swaps", f64::INFINITY)] {
        let mut s = ReSgldSettings::new(step, &ladder);
        s.swap_every = 5;
        s.correction = f;
        let re = ReSgld::new(s, Minibatch::new(100))?;
        let (out, t) = run(&t50, &re, &start, forty_runs(n_iter, seed))?;
        let mut r = row("B", label, &out, &mode_of, &truth, true, t)?;
        r.note = rates(&out);
        rows.push(r);
    }
    // CSGLD at the demonstration's temperature, on the untempered model (its energies U).
    let mut s = CsgldSettings::new(1e-3, 3_600.0, 40.0, 100);
    s.temperature = 50.0;
    s.zeta = 0.95;
    s.sa_step = StepSize::Shifted { a: 10.0, b: 1_000.0, c: 0.8 };
    let cs = Csgld::new(s, Minibatch::new(100))?;
    let (out, t) = run(&base, &cs, &start, forty_runs(4 * n_iter, seed))?;
    let mut r = row("B", "CSGLD, weighted, minibatch energies (n_e = 100)", &out, &mode_of, &truth, true, t)?;
    let highest = out.chains.iter().map(|c| c.sampler.partition()).max().unwrap_or(0);
    r.note = format!("barrier partition 95; final partitions up to {highest}");
    rows.push(r);
    Ok(())
}

/// Target C: four modes in 2-D.
fn target_c(quick: bool, seed: u64, rows: &mut Vec<Row>) -> Result<()> {
    let m = NoisyMixture::four_modes(2);
    let (truth, leak) = m.mode_weights();
    assert!(leak < 1e-4, "the modes' regions leak {leak}");
    let mode_of = |x: &[f64]| m.mode_of(x);
    let n_iter = if quick { 30_000 } else { 100_000 };
    let start = [-4.0, -4.0];
    let (cold, hot) = (0.002, 0.01);
    let sgld = Sgld::new(SgldSettings::constant(cold), Minibatch::new(100))?;
    let (out, t) = run(&m, &sgld, &start, forty_runs(n_iter, seed))?;
    rows.push(row("C", "SGLD", &out, &mode_of, &truth, true, t)?);
    let ladder = [1.0, 4.0, 16.0];
    for (label, f) in [("reSGLD, corrected swaps (F = 1)", 1.0), ("reSGLD, naive swaps", f64::INFINITY)] {
        let mut s = ReSgldSettings::new(cold, &ladder);
        s.step_sizes = vec![cold, hot, hot];
        s.swap_every = 5;
        s.correction = f;
        let re = ReSgld::new(s, Minibatch::new(100))?;
        let (out, t) = run(&m, &re, &start, forty_runs(n_iter, seed))?;
        let mut r = row("C", label, &out, &mode_of, &truth, true, t)?;
        r.note = rates(&out);
        rows.push(r);
    }
    for (label, ne, weighted) in
        [("CSGLD, weighted, exact energies", 1_000, true), ("CSGLD, unweighted, exact energies", 1_000, false)]
    {
        let mut s = CsgldSettings::new(cold, 0.0, 0.5, 80);
        s.zeta = 0.75;
        s.energy_batch = ne;
        s.sa_step = StepSize::Shifted { a: 10.0, b: 1_000.0, c: 0.8 };
        let cs = Csgld::new(s, Minibatch::new(100))?;
        let (out, t) = run(&m, &cs, &start, forty_runs(2 * n_iter, seed))?;
        rows.push(row("C", label, &out, &mode_of, &truth, weighted, t)?);
    }
    Ok(())
}

/// What the verdict says on target A: the default path (chains dispersed around the mode it
/// finds), the same with chains started across the line, and reSGLD's chains.
fn verdicts(seed: u64) -> Result<Vec<(String, bool, f64, f64)>> {
    let m = NoisyMixture::resgld_paper(2);
    let below = |t: &[f64]| if m.mode_of(t) == 0 { 1.0 } else { 0.0 };
    let mut out = Vec::new();
    let fit = sgmcmc::Sample::new(&m, Sgld::auto()).seed(seed).run()?;
    let w = fit.estimate().expectation(|t| below(t.as_slice().unwrap()))?;
    out.push((
        "Sample, default starts (around the mode found from 0)".into(),
        fit.convergence.converged,
        fit.convergence.max_rhat,
        w,
    ));
    let starts = [[-8.0], [-2.0], [2.0], [8.0]];
    let fit = sgmcmc::Sample::new(&m, Sgld::auto()).seed(seed).chain_starts(&starts).run()?;
    let w = fit.estimate().expectation(|t| below(t.as_slice().unwrap()))?;
    out.push(("Sample, chain_starts -8, -2, 2, 8".into(), fit.convergence.converged, fit.convergence.max_rhat, w));
    let mut s = ReSgldSettings::new(1e-3, &[1.0, 10.0]);
    s.swap_every = 5;
    let fit = sgmcmc::Sample::new(&m, ReSgld::new(s, Minibatch::new(100))?).seed(seed).run()?;
    let w = fit.estimate().expectation(|t| below(t.as_slice().unwrap()))?;
    out.push((
        format!(
            "Sample with ReSgld (ladder 1, 10), default starts ({})",
            if fit.target.as_ref().is_some_and(|t| t.reached) { "target reached" } else { "target not reached" }
        ),
        fit.convergence.converged,
        fit.convergence.max_rhat,
        w,
    ));
    let mut s = ReSgldSettings::new(0.002, &[1.0, 10.0]);
    s.step_sizes[1] = 0.01;
    s.swap_every = 5;
    let re = ReSgld::new(s, Minibatch::new(100))?;
    let rs = RunSettings { n_iter: 100_000, burn_in: 10_000, n_chains: 4, seed, parallel: true, ..Default::default() };
    let run = Runner::new(&m, &re).start(&[-4.0]).settings(rs).run()?;
    let c = sgmcmc::diagnostics::convergence(&run.estimate)?;
    let w = run.estimate.expectation(|t| below(t.as_slice().unwrap()))?;
    out.push(("reSGLD, 4 chains from -4 (Runner, diagnostics::convergence)".into(), c.converged, c.max_rhat, w));
    Ok(out)
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "quick");
    let seed = 2026;
    let mut rows = Vec::new();
    let t0 = Instant::now();
    target_a(quick, seed, &mut rows)?;
    target_b(quick, seed, &mut rows)?;
    target_c(quick, seed, &mut rows)?;
    let mut text = format!(
        "{RUNS} runs per method, each started in the first mode; mode weights: mean ± MCSE (z against the truth); \
         PASS when every |z| ≤ {Z_PASS}\n"
    );
    let mut current = "";
    for r in &rows {
        if r.target != current {
            current = r.target;
            let _ = writeln!(text, "\ntarget {}:", r.target);
        }
        let modes: Vec<String> =
            r.means.iter().zip(&r.ses).zip(&r.zs).map(|((m, s), z)| format!("{m:.3} ± {s:.3} (z {z:+.1})")).collect();
        let _ = writeln!(
            text,
            "  {:50} {}  {}  [{:.0} gradients, {:.0} potentials per run, {:.1} s] {}",
            r.method,
            modes.join("  "),
            if r.passes() { "PASS" } else { "FAIL" },
            r.gradients,
            r.potentials,
            r.secs,
            r.note
        );
    }
    let _ = writeln!(text, "\nThe verdict on target A (truth: weight 0.400 below the barrier):");
    for (label, converged, rhat, w) in verdicts(seed)? {
        let _ = writeln!(
            text,
            "  {label:62} {}  max R̂ {rhat:.3}  weight {w:.3}",
            if converged { "converged    " } else { "NOT CONVERGED" }
        );
    }
    print!("{text}");
    if !quick {
        let doc = format!(
            "# Mode weights over 40 runs\n\nWritten by `cargo run --release --example multimodal` (seed {seed}; \
             the targets and methods are described in the example's header).\n\n```text\n{text}```\n"
        );
        std::fs::write("docs/multimodal.md", doc)
            .map_err(|e| sgmcmc::Error::Io { path: "docs/multimodal.md".into(), message: e.to_string() })?;
        println!("\ntables: docs/multimodal.md");
    }
    let a: Vec<&Row> = rows.iter().filter(|r| r.target == "A").collect();
    let series: Vec<Series> = a
        .iter()
        .map(|r| Series::new(r.method.clone(), r.runs.iter().enumerate().map(|(i, &w)| (i as f64 + 1.0, w)).collect()))
        .chain(std::iter::once(Series::dashed("truth 0.4", vec![(1.0, 0.4), (RUNS as f64, 0.4)])))
        .collect();
    linear_svg(
        "target/multimodal_weights.svg",
        "Target A: weight of the mode at −4, per run",
        "run",
        "weight",
        (1.0, RUNS as f64),
        (0.0, 1.0),
        &series,
    )
    .map_err(|e| sgmcmc::Error::Io { path: "target/multimodal_weights.svg".into(), message: e.to_string() })?;
    println!("\nplot: target/multimodal_weights.svg; {:.1} s in all", t0.elapsed().as_secs_f64());
    let mut json = String::from("{\"runs\":40,\"rows\":[");
    for (i, r) in rows.iter().enumerate() {
        let _ = write!(
            json,
            "{}{{\"target\":\"{}\",\"method\":\"{}\",\"means\":{:?},\"ses\":{:?},\"max_abs_z\":{},\"pass\":{}}}",
            if i == 0 { "" } else { "," },
            r.target,
            r.method,
            r.means,
            r.ses,
            match r.zs.iter().fold(0.0f64, |a, z| a.max(z.abs())) {
                z if z.is_finite() => format!("{z:.3}"),
                _ => "null".into(),
            },
            r.passes()
        );
    }
    json.push_str("]}");
    println!("RESULT {json}");
    Ok(())
}
