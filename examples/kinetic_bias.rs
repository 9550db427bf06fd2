//! The kinetic splittings (BAOAB, UBU) against the Euler-type kinetic update (SGHMC) and SGLD,
//! and epoch-wise random reshuffling against independent minibatches, measured on real data
//! against reference posteriors.
//!
//! Run with `cargo run --release --example kinetic_bias` (a few minutes on 2 cores; `-- quick`
//! for a short smoke run that writes nothing). Writes `target/kinetic_bias.svg` and
//! `docs/kinetic-bias.md`; the last line of stdout is `RESULT {json}`.
//!
//! Part 1, the integrators (`data/wdbc.csv`: logistic regression on the 30 standardised features
//! and an intercept, N = 569, d = 31, prior N(0, 10 I); a posterior far from Gaussian, nearly
//! separable classes). Every scheme runs in the coordinates that whiten the Laplace
//! approximation at the mode (unit mass, so frequencies ≈ 1), from the mode, 4 chains × 40 000
//! iterations, one gradient per iteration: equal iterations are equal cost. The underdamped
//! schemes integrate the same SDE (friction γ = 1 per unit time) at time step h: the Euler-type
//! update (`Sghmc` with η = h², α = γh), `Baoab`, `Ubu`; SGLD (overdamped) runs at step h²/2,
//! the overdamped limit of one kinetic step. The error of each run is its largest error over the
//! 31 coordinates, of a mean in posterior sds and of an sd relative to the sd, against a long
//! NUTS reference; ± is twice the Monte Carlo error of that coordinate (errors inside it are
//! noise, not bias). With exact gradients the error is the discretisation bias (Euler-type and
//! SGLD O(h), BAOAB and UBU O(h²)); with minibatches of 56 (10 %) the gradient noise adds its
//! own bias, which the splittings do not remove.
//!
//! Part 2, reshuffling (`data/randhie.csv`: Poisson regression of doctor visits on 9
//! covariates and an intercept, N = 20 190, d = 10, prior N(0, 10² I)): whitened SGLD with
//! minibatches of 100 drawn with replacement against reshuffled ones (each epoch a fresh
//! permutation in consecutive blocks), at four steps (0.0025 to 0.02 in whitened units), 4 chains × 200 000 iterations each (equal
//! cost); the error against an importance-sampling reference, and the wall time of each policy
//! measured interleaved (three rounds, the best of each).

#[path = "support/plot.rs"]
mod plot;
mod support;
#[path = "support/vs_nuts.rs"]
mod vs_nuts;

use plot::{Series, loglog_svg};
use sgmcmc::ndarray::{Array1, Array2};
use sgmcmc::{
    Baoab, Estimate, Family, FullGradient, Glm, GlmSettings, KineticSettings, Minibatch, Model, RunSettings, Runner,
    Sampler, Sghmc, SghmcSettings, Sgld, SgldSettings, Storage, Ubu, Whitening,
};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;
use vs_nuts::Reference;
// `vs_nuts` reaches these through `super::`.
#[allow(unused_imports)]
use support::{cholesky_lower, normals, spd_inverse};

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Friction per unit time of the underdamped schemes (whitened coordinates).
const FRICTION: f64 = 1.0;

/// The full gradient `∇U(θ)`.
fn full_gradient<M: Model + ?Sized>(m: &M, theta: &[f64]) -> Res<Vec<f64>> {
    let all: Vec<usize> = (0..m.n_data()).collect();
    let (mut g, mut p) = (vec![0.0; theta.len()], vec![0.0; theta.len()]);
    m.grad_data_sum(theta, &all, &mut g)?;
    m.grad_prior(theta, &mut p)?;
    Ok(g.iter().zip(&p).map(|(a, b)| a + b).collect())
}

/// The mode by gradient descent polished with Newton steps on a finite-difference Hessian, and
/// that Hessian (central differences of the full gradient, symmetrised).
fn mode_and_hessian<M: Model + ?Sized>(m: &M, start: &[f64]) -> Res<(Vec<f64>, Array2<f64>)> {
    let d = start.len();
    let hessian = |theta: &[f64]| -> Res<Array2<f64>> {
        let mut h = Array2::zeros((d, d));
        for j in 0..d {
            let eps = 1e-5 * theta[j].abs().max(1.0);
            let (mut up, mut down) = (theta.to_vec(), theta.to_vec());
            up[j] += eps;
            down[j] -= eps;
            let (gu, gd) = (full_gradient(m, &up)?, full_gradient(m, &down)?);
            for i in 0..d {
                h[[i, j]] = (gu[i] - gd[i]) / (2.0 * eps);
            }
        }
        Ok((&h + &h.t()) * 0.5)
    };
    let mut theta = sgmcmc::find_mode(m, start, &Default::default())?.theta;
    for _ in 0..5 {
        let g = Array1::from(full_gradient(m, &theta)?);
        let step = support::solve("Newton step", &hessian(&theta)?, &g)?;
        theta.iter_mut().zip(step.iter()).for_each(|(t, s)| *t -= s);
    }
    let h = hessian(&theta)?;
    Ok((theta, h))
}

/// The largest error over coordinates (means in sds, sds relative) and twice the Monte Carlo
/// error of the coordinate where it is.
#[derive(Debug, Clone, Copy)]
struct Err2 {
    mean: f64,
    mean_mc: f64,
    sd: f64,
    sd_mc: f64,
}

fn errors(est: &Estimate, r: &Reference) -> Res<Err2> {
    // Each coordinate's mean, sd and their Monte Carlo errors (ArviZ's, from the chains' ESS).
    let rows = sgmcmc::diagnostics::summary(est)?;
    let mut e = Err2 { mean: 0.0, mean_mc: 0.0, sd: 0.0, sd_mc: 0.0 };
    for (j, row) in rows.iter().enumerate() {
        let em = (row.mean - r.mean[j]).abs() / r.sd[j];
        if em > e.mean {
            e.mean = em;
            e.mean_mc = 2.0 * row.mcse_mean / r.sd[j];
        }
        let es = (row.sd / r.sd[j] - 1.0).abs();
        if es > e.sd {
            e.sd = es;
            e.sd_mc = 2.0 * row.mcse_sd / r.sd[j];
        }
    }
    Ok(e)
}

fn run_settings(n_iter: u64, seed: u64) -> RunSettings {
    RunSettings {
        n_iter,
        burn_in: n_iter / 10,
        thin: 4,
        n_chains: 4,
        seed,
        storage: Storage::Samples,
        parallel: true,
        ..Default::default()
    }
}

fn run<M: Model + Sync + ?Sized, S: Sampler>(m: &M, s: &S, start: &[f64], rs: RunSettings) -> Res<Estimate> {
    Ok(Runner::new(m, s).start(start).settings(rs).run()?.estimate)
}

/// One scheme's errors at every step, exact and minibatch gradients.
struct Scheme {
    name: &'static str,
    exact: Vec<Err2>,
    minibatch: Vec<Err2>,
}

/// Part 1: the integrators on the Wisconsin data.
fn integrators(quick: bool, text: &mut String) -> Res<(Vec<f64>, Vec<Scheme>)> {
    let m = support::wdbc_standardised(10.0)?;
    let d = m.dim();
    let t = Instant::now();
    let (mode, h) = mode_and_hessian(&m, &vec![0.0; d])?;
    let cov = support::spd_inverse("Laplace covariance", &h)?;
    let w = Arc::new(Whitening::from_covariance(&mode, &cov)?);
    let reference_draws = if quick { 2_000 } else { 15_000 };
    let r = vs_nuts::nuts_reference(&m, 4, reference_draws, 17)?;
    let _ = writeln!(
        text,
        "Part 1: wdbc (N = {}, d = {d}); reference: NUTS, 4 chains x {reference_draws} draws, max standard error {:.4} ({:.0} s)",
        m.n_data(),
        r.max_se,
        t.elapsed().as_secs_f64()
    );
    let steps = if quick { vec![0.2, 0.8] } else { vec![0.1, 0.2, 0.4, 0.7, 1.0] };
    let n_iter = if quick { 4_000 } else { 40_000 };
    let batch = m.n_data() / 10;
    let mut schemes = Vec::new();
    for name in ["SGLD (step h^2/2)", "Euler-type (SGHMC)", "BAOAB", "UBU"] {
        let mut scheme = Scheme { name, exact: Vec::new(), minibatch: Vec::new() };
        for (k, &h) in steps.iter().enumerate() {
            let rs = run_settings(n_iter, 100 + k as u64);
            let wh = Some(w.clone());
            let kinetic = KineticSettings::constant(h, FRICTION);
            let sghmc = SghmcSettings::constant(h * h, FRICTION * h);
            let (exact, mini) = match name {
                "SGLD (step h^2/2)" => (
                    run(
                        &m,
                        &Sgld::new(SgldSettings::constant(h * h / 2.0), FullGradient::new())?
                            .with_whitening(wh.clone()),
                        &mode,
                        rs,
                    )?,
                    run(
                        &m,
                        &Sgld::new(SgldSettings::constant(h * h / 2.0), Minibatch::new(batch))?.with_whitening(wh),
                        &mode,
                        rs,
                    )?,
                ),
                "Euler-type (SGHMC)" => (
                    run(&m, &Sghmc::new(sghmc, FullGradient::new())?.with_whitening(wh.clone()), &mode, rs)?,
                    run(&m, &Sghmc::new(sghmc, Minibatch::new(batch))?.with_whitening(wh), &mode, rs)?,
                ),
                "BAOAB" => (
                    run(&m, &Baoab::new(kinetic, FullGradient::new())?.with_whitening(wh.clone()), &mode, rs)?,
                    run(&m, &Baoab::new(kinetic, Minibatch::new(batch))?.with_whitening(wh), &mode, rs)?,
                ),
                _ => (
                    run(&m, &Ubu::new(kinetic, FullGradient::new())?.with_whitening(wh.clone()), &mode, rs)?,
                    run(&m, &Ubu::new(kinetic, Minibatch::new(batch))?.with_whitening(wh), &mode, rs)?,
                ),
            };
            scheme.exact.push(errors(&exact, &r)?);
            scheme.minibatch.push(errors(&mini, &r)?);
        }
        schemes.push(scheme);
    }
    let _ = writeln!(
        text,
        "largest error over the {d} coordinates: means in sds / sds relative (± twice its Monte Carlo error); \
         {n_iter} iterations x 4 chains per cell, one gradient each"
    );
    for (label, exact) in [("exact gradients", true), (&*format!("minibatches of {batch}"), false)] {
        let _ = writeln!(text, "\n  {label}:");
        let _ = write!(text, "  {:22}", "h");
        for h in &steps {
            let _ = write!(text, " {:>26}", format!("{h}"));
        }
        text.push('\n');
        for s in &schemes {
            let _ = write!(text, "  {:22}", s.name);
            for e in if exact { &s.exact } else { &s.minibatch } {
                let _ = write!(text, " {:>26}", format!("{:.3}±{:.3} / {:.3}±{:.3}", e.mean, e.mean_mc, e.sd, e.sd_mc));
            }
            text.push('\n');
        }
    }
    Ok((steps, schemes))
}

/// Part 2: reshuffled against independent minibatches on the RAND data.
fn reshuffling(quick: bool, text: &mut String) -> Res<Vec<(f64, Err2, Err2)>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/randhie.csv");
    let m = Glm::from_csv(Family::Poisson, path, "mdvis", &GlmSettings::default())?;
    let d = m.dim();
    let (mode, h) = mode_and_hessian(&m, &vec![0.0; d])?;
    let cov = support::spd_inverse("Laplace covariance", &h)?;
    let w = Arc::new(Whitening::from_covariance(&mode, &cov)?);
    let r = vs_nuts::reference(&m, &mode, &h, if quick { 2_000 } else { 20_000 }, 19)?;
    let _ = writeln!(
        text,
        "\nPart 2: randhie Poisson regression (N = {}, d = {d}); reference: importance sampling from the Laplace \
         approximation, {} draws, weights' ESS {:.0}, max standard error {:.4}",
        m.n_data(),
        r.draws,
        r.ess,
        r.max_se
    );
    let batch = 100;
    let n_iter = if quick { 20_000 } else { 200_000 };
    let steps = if quick { vec![0.005] } else { vec![0.0025, 0.005, 0.01, 0.02] };
    let mut rows = Vec::new();
    let _ =
        writeln!(text, "  whitened SGLD, minibatches of {batch}, {n_iter} iterations x 4 chains (equal cost per row):");
    let _ =
        writeln!(text, "  {:>6}  {:>34}  {:>34}", "step", "with replacement: means / sds", "reshuffled: means / sds");
    for (k, &step) in steps.iter().enumerate() {
        let rs = run_settings(n_iter, 200 + k as u64);
        let iid = Sgld::new(SgldSettings::constant(step), Minibatch::new(batch))?.with_whitening(Some(w.clone()));
        let rr = Sgld::new(SgldSettings::constant(step), Minibatch::reshuffled(batch))?.with_whitening(Some(w.clone()));
        let (a, b) = (errors(&run(&m, &iid, &mode, rs)?, &r)?, errors(&run(&m, &rr, &mode, rs)?, &r)?);
        let f = |e: Err2| format!("{:.3}±{:.3} / {:.3}±{:.3}", e.mean, e.mean_mc, e.sd, e.sd_mc);
        let _ = writeln!(text, "  {step:>6}  {:>34}  {:>34}", f(a), f(b));
        rows.push((step, a, b));
    }
    // Wall time per policy, interleaved, one chain each on one thread, best of three rounds.
    let timing = RunSettings {
        n_iter: if quick { 20_000 } else { 300_000 },
        burn_in: 0,
        n_chains: 1,
        storage: Storage::Moments,
        parallel: false,
        ..Default::default()
    };
    let (mut best_iid, mut best_rr) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        let iid = Sgld::new(SgldSettings::constant(0.05), Minibatch::new(batch))?.with_whitening(Some(w.clone()));
        let rr = Sgld::new(SgldSettings::constant(0.05), Minibatch::reshuffled(batch))?.with_whitening(Some(w.clone()));
        let t = Instant::now();
        run(&m, &iid, &mode, timing)?;
        best_iid = best_iid.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        run(&m, &rr, &mode, timing)?;
        best_rr = best_rr.min(t.elapsed().as_secs_f64());
    }
    let per = |s: f64| 1e6 * s / timing.n_iter as f64;
    let _ = writeln!(
        text,
        "  speed, one chain of {} iterations on one thread, best of 3 interleaved rounds: with replacement {:.2} µs per \
         iteration, reshuffled {:.2} µs (ratio {:.2})",
        timing.n_iter,
        per(best_iid),
        per(best_rr),
        best_iid / best_rr
    );
    Ok(rows)
}

fn main() -> Res<()> {
    let quick = std::env::args().any(|a| a == "quick");
    let t0 = Instant::now();
    let mut text = String::new();
    let (steps, schemes) = integrators(quick, &mut text)?;
    let rows = reshuffling(quick, &mut text)?;
    print!("{text}");
    let series: Vec<Series> = schemes
        .iter()
        .map(|s| {
            Series::new(
                format!("{} (exact gradients)", s.name),
                steps.iter().zip(&s.exact).map(|(&h, e)| (h, e.sd)).collect(),
            )
        })
        .collect();
    loglog_svg(
        "target/kinetic_bias.svg",
        "wdbc: largest sd error against the time step h (exact gradients)",
        "h (whitened time step)",
        "largest |sd / sd_ref - 1|",
        &series,
    )?;
    if !quick {
        let doc = format!(
            "# Kinetic splittings and reshuffling, measured\n\nWritten by `cargo run --release --example kinetic_bias` \
             (the set-up is in the example's header).\n\n```text\n{text}```\n"
        );
        std::fs::write("docs/kinetic-bias.md", doc)?;
        println!("\ntables: docs/kinetic-bias.md; plot: target/kinetic_bias.svg");
    }
    println!("{:.0} s in all", t0.elapsed().as_secs_f64());
    let mut json = String::from("{\"steps\":");
    let _ = write!(json, "{steps:?},\"schemes\":[");
    for (i, s) in schemes.iter().enumerate() {
        let _ = write!(
            json,
            "{}{{\"name\":\"{}\",\"exact_sd_error\":{:?},\"minibatch_sd_error\":{:?}}}",
            if i == 0 { "" } else { "," },
            s.name,
            s.exact.iter().map(|e| e.sd).collect::<Vec<_>>(),
            s.minibatch.iter().map(|e| e.sd).collect::<Vec<_>>()
        );
    }
    let _ = write!(json, "],\"reshuffling\":[");
    for (i, (step, a, b)) in rows.iter().enumerate() {
        let _ = write!(
            json,
            "{}{{\"step\":{step},\"iid_mean\":{:.4},\"iid_sd\":{:.4},\"reshuffled_mean\":{:.4},\"reshuffled_sd\":{:.4}}}",
            if i == 0 { "" } else { "," },
            a.mean,
            a.sd,
            b.mean,
            b.sd
        );
    }
    json.push_str("]}");
    println!("RESULT {json}");
    Ok(())
}
