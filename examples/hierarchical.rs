//! A hierarchical regression written on its natural scale — group effects with an unknown
//! positive scale τ, a positive noise scale σ and the groups' shares on a simplex — sampled on ℝᵈ
//! through a [`Layout`] and summarised by name.
//!
//! Model (N = 2 000 observations in G = 5 groups):
//! `yᵢ = α + β xᵢ + u_{gᵢ} + εᵢ`, `εᵢ ~ N(0, σ²)`, `u_g ~ N(0, τ²)`, `gᵢ ~ Categorical(w)`;
//! priors `α, β ~ N(0, 10²)`, `τ, σ ~ Exponential(1)`, `w ~ Dirichlet(1, …, 1)`.
//! The model is written by hand on the constrained scale (τ, σ > 0, w on the simplex);
//! `Constrained` adds the log-Jacobian and the chain rule. SGLD-CV is tuned with nothing set by
//! hand (mode, whitening, step for the planned run) and checked against the default MALA on the
//! same model; the summary table names every row (`alpha`, `u[0]`, `tau`, `w[4]`, …). With
//! feature `zarr`, the draws are also written as a Zarr trace with one ArviZ variable per block.
//!
//! Run with `cargo run --release --example hierarchical [DIR]` (DIR for the Zarr trace, default
//! `target/hierarchical`; add `--features zarr` to write it). Ends with `RESULT {json}`.

use sgmcmc::prelude::*;
use sgmcmc::tune::PlannedRun;
use sgmcmc::tune::dispersed_starts;
use sgmcmc::{
    Constrained, Layout, Mala, MalaSettings, check_model,
    tune::{TuneSettings, tune},
};
use std::time::Instant;

const G: usize = 5;
const N: usize = 2_000;

/// The regression on the constrained scale: θ = (α, β, u₀ … u₄, τ, σ, w₀ … w₄).
struct Hierarchical {
    x: Vec<f64>,
    y: Vec<f64>,
    g: Vec<usize>,
}

const ALPHA: usize = 0;
const BETA: usize = 1;
const U: usize = 2;
const TAU: usize = U + G;
const SIGMA: usize = TAU + 1;
const W: usize = SIGMA + 1;
const DIM: usize = W + G;

impl Hierarchical {
    fn layout() -> Layout {
        Layout::new()
            .real("alpha", &[])
            .real("beta", &[])
            .real("u", &[G])
            .positive("tau", &[])
            .positive("sigma", &[])
            .simplex("w", G)
    }

    fn synthetic(seed: u64) -> Self {
        use rand::RngExt;
        use rand_distr::{Distribution, StandardNormal};
        let mut rng = sgmcmc::rng::stream(seed, &[0]);
        let u: Vec<f64> = (0..G)
            .map(|_| {
                let z: f64 = StandardNormal.sample(&mut rng);
                0.5 * z
            })
            .collect();
        let cum = [0.1, 0.25, 0.45, 0.7, 1.0];
        let (mut x, mut y, mut g) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..N {
            let p: f64 = rng.random();
            let gi = cum.iter().position(|&c| p < c).unwrap_or(G - 1);
            let xi: f64 = StandardNormal.sample(&mut rng);
            let e: f64 = StandardNormal.sample(&mut rng);
            x.push(xi);
            y.push(1.0 + 2.0 * xi + u[gi] + 0.7 * e);
            g.push(gi);
        }
        Hierarchical { x, y, g }
    }

    fn residual(&self, t: &[f64], i: usize) -> f64 {
        self.y[i] - t[ALPHA] - t[BETA] * self.x[i] - t[U + self.g[i]]
    }
}

impl Model for Hierarchical {
    fn dim(&self) -> usize {
        DIM
    }
    fn n_data(&self) -> usize {
        self.y.len()
    }
    fn grad_prior(&self, t: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
        out.fill(0.0);
        out[ALPHA] = t[ALPHA] / 100.0;
        out[BETA] = t[BETA] / 100.0;
        let tau = t[TAU];
        let mut ss = 0.0;
        for k in 0..G {
            out[U + k] = t[U + k] / (tau * tau);
            ss += t[U + k] * t[U + k];
        }
        out[TAU] = -ss / (tau * tau * tau) + G as f64 / tau + 1.0;
        out[SIGMA] = 1.0;
        Ok(())
    }
    fn grad_data_sum(&self, t: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
        out.fill(0.0);
        let s2 = t[SIGMA] * t[SIGMA];
        for &i in idx {
            let r = self.residual(t, i);
            out[ALPHA] -= r / s2;
            out[BETA] -= r * self.x[i] / s2;
            out[U + self.g[i]] -= r / s2;
            out[SIGMA] += -r * r / (s2 * t[SIGMA]) + 1.0 / t[SIGMA];
            out[W + self.g[i]] -= 1.0 / t[W + self.g[i]];
        }
        Ok(())
    }
    fn potential_prior(&self, t: &[f64]) -> sgmcmc::Result<f64> {
        let tau = t[TAU];
        let ss: f64 = (0..G).map(|k| t[U + k] * t[U + k]).sum();
        Ok((t[ALPHA].powi(2) + t[BETA].powi(2)) / 200.0 + ss / (2.0 * tau * tau) + G as f64 * tau.ln() + tau + t[SIGMA])
    }
    fn potential_data_sum(&self, t: &[f64], idx: &[usize]) -> sgmcmc::Result<f64> {
        let s2 = t[SIGMA] * t[SIGMA];
        Ok(idx.iter().map(|&i| self.residual(t, i).powi(2) / (2.0 * s2) + t[SIGMA].ln() - t[W + self.g[i]].ln()).sum())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let t_all = Instant::now();
    let dir = std::env::args().nth(1).unwrap_or_else(|| "target/hierarchical".into());
    let model = Constrained::new(Hierarchical::synthetic(5), Hierarchical::layout())?;
    println!(
        "Hierarchical regression: N = {N}, {G} groups; {} parameters on the constrained scale, {} sampled",
        model.layout().dim(),
        model.dim()
    );
    check_model(&model, &model.unconstrain(&start())?, &Default::default())?;

    // SGLD-CV, tuned for the planned run; 4 chains from dispersed starts.
    let settings = RunSettings { n_iter: 22_000, burn_in: 2_000, n_chains: 4, seed: 11, ..Default::default() };
    let planned = TuneSettings { planned_run: PlannedRun::new(20_000, 4), ..Default::default() };
    let phi0 = model.unconstrain(&start())?;
    let cv = ControlVariate::at_mode(&model, &phi0, &ModeSettings::default(), CvSettings::default())?;
    let t = Instant::now();
    let tuned = tune(&model, &Sgld::new(SgldSettings::default(), cv)?, &phi0, &planned)?;
    let starts = dispersed_starts(&model, &tuned.mode, 4, 2.0, 11)?;
    let sgld = Runner::new(&model, &tuned.sampler).starts(&starts).settings(settings).run()?;
    let sgld_s = t.elapsed().as_secs_f64();
    // Reference: the default MALA (adapted step and dense metric), exact.
    let t = Instant::now();
    let mala = Runner::new(&model, &Mala::new(MalaSettings::default())?).starts(&starts).settings(settings).run()?;
    let mala_s = t.elapsed().as_secs_f64();

    let a = model.summary_table(&sgld.estimate)?;
    let b = model.summary_table(&mala.estimate)?;
    println!("\nSGLD-CV (tuned: {}), {sgld_s:.1} s:\n{a}", tuned.preconditioning);
    // The run's own verdict and Monte Carlo bound (on the sampled scale): what a user without
    // the MALA reference reads.
    let verdict = sgld.convergence()?;
    println!("SGLD-CV run: {verdict}\n");
    println!("MALA (default settings), {mala_s:.1} s:\n{b}");
    println!("{:10} {:>9} {:>9} {:>8} {:>9}", "parameter", "SGLD-CV", "MALA", "diff/sd", "sd ratio");
    let (mut worst, mut sd_dev): (f64, f64) = (0.0, 0.0);
    for ((name, x), y) in a.names.iter().zip(&a.rows).zip(&b.rows) {
        let z = (x.mean - y.mean) / y.sd;
        worst = worst.max(z.abs());
        sd_dev = sd_dev.max((x.sd / y.sd - 1.0).abs());
        println!("{name:10} {:>9.4} {:>9.4} {:>8.3} {:>9.3}", x.mean, y.mean, z, x.sd / y.sd);
    }
    let max_rhat = a.rows.iter().chain(&b.rows).map(|r| r.rhat).fold(0.0, f64::max);
    println!(
        "largest |mean difference| {worst:.3} posterior sd; largest sd error {:.1} %; largest R-hat {max_rhat:.3}; \
         the SGLD-CV run's own bound {:.3} ({})",
        100.0 * sd_dev,
        verdict.error_bound,
        if worst.max(sd_dev) <= verdict.error_bound { "the errors are within it" } else { "the errors EXCEED it" }
    );

    #[cfg(feature = "zarr")]
    {
        let trace = model.write_zarr(std::path::Path::new(&dir).join("trace.zarr"), &mala.estimate)?;
        println!("Zarr trace, one variable per block: {}", trace.path().display());
    }
    #[cfg(not(feature = "zarr"))]
    println!("(build with --features zarr to write the Zarr trace to {dir})");
    println!(
        "RESULT {{\"example\":\"hierarchical\",\"max_mean_diff_sd\":{worst:.4},\"max_sd_error\":{sd_dev:.4},\"max_rhat\":{max_rhat:.4},\"sgld_cv_error_bound\":{:.4},\"sgld_cv_s\":{sgld_s:.2},\"mala_s\":{mala_s:.2},\"total_s\":{:.2}}}",
        verdict.error_bound,
        t_all.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A starting point on the constrained scale: zeros, unit scales, equal shares.
fn start() -> Vec<f64> {
    let mut t = vec![0.0; DIM];
    t[TAU] = 1.0;
    t[SIGMA] = 1.0;
    t[W..].fill(1.0 / G as f64);
    t
}
