//! The Rust side of the Python package's bit-identity test (python/tests/test_parity.py): the
//! `Sample` path as a Rust user writes it, on the quickstart's model and on GLMs built from
//! arrays, its draws and printed summary written to a folder, for the Python package to match
//! bit for bit with `sgmcmc.sample` on the same model, settings and seed.
//!
//! Run with `cargo run --release --example python_parity -- <folder>`: writes, per case,
//! `<case>_draws.npy` (chains × draws × d, the sampler's coordinates), `<case>_summary.txt`
//! (`println!("{fit}")`'s text), and the GLMs' data (`glm_x.npy`, `glm_y.npy`, `logit_x.npy`,
//! `logit_y.npy`). Ends with `RESULT {json}`.

use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use sgmcmc::ndarray::{Array1, Array2, Array3};
use sgmcmc::prelude::*;
use sgmcmc::{Family, GlmSettings, Sampled};
use std::path::Path;

/// The draws of every chain, on the sampler's coordinates: chains × draws × d.
fn draws<S>(fit: &Sampled<S>) -> Array3<f64> {
    let est = fit.estimate();
    let parts: Vec<_> = (0..est.n_parts()).filter_map(|i| est.samples(i)).collect();
    let n = parts.iter().map(|p| p.draws().nrows()).min().unwrap_or(0);
    let d = est.dim();
    Array3::from_shape_fn((parts.len(), n, d), |(c, i, j)| parts[c].draws()[[i, j]])
}

/// A position-sensitive checksum of every draw's bits: `Σₖ bits(xₖ) · (k + 1)` (wrapping, in
/// the row-major order of chains × draws × d), which NumPy computes alike.
fn checksum(a: &Array3<f64>) -> u64 {
    a.iter().enumerate().fold(0u64, |s, (k, x)| s.wrapping_add(x.to_bits().wrapping_mul(k as u64 + 1)))
}

/// Writes the case's draws (every one if at most 2 000 per chain, else a thinned subset), the
/// checksum of all of them with their shape, and the printed summary.
fn save<S>(dir: &Path, case: &str, fit: &Sampled<S>) -> Result<(), Box<dyn std::error::Error>> {
    let all = draws(fit);
    let every = all.shape()[1].div_ceil(2_000).max(1);
    let kept = all.slice(sgmcmc::ndarray::s![.., ..;every, ..]).to_owned();
    ndarray_npy::write_npy(dir.join(format!("{case}_draws.npy")), &kept)?;
    let shape = all.shape();
    std::fs::write(
        dir.join(format!("{case}_checksum.txt")),
        format!("{} {} {} {} {}\n", shape[0], shape[1], shape[2], every, checksum(&all)),
    )?;
    std::fs::write(dir.join(format!("{case}_summary.txt")), format!("{fit}"))?;
    println!(
        "{case}: {} chains x {} draws; converged {}",
        fit.settings.n_chains,
        draws(fit).shape()[1],
        fit.convergence.converged
    );
    Ok(())
}

/// A seeded data set: N × p standard-normal features and a response from `response(η)`.
fn data(n: usize, p: usize, seed: u64, response: impl Fn(f64, f64) -> f64) -> (Array2<f64>, Array1<f64>) {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let x = Array2::from_shape_fn((n, p), |_| StandardNormal.sample(&mut rng));
    let beta: Vec<f64> = (0..p).map(|j| 0.5 - 0.3 * j as f64).collect();
    let y = Array1::from_shape_fn(n, |i| {
        let eta = 0.3 + (0..p).map(|j| x[[i, j]] * beta[j]).sum::<f64>();
        let z: f64 = StandardNormal.sample(&mut rng);
        response(eta, z)
    });
    (x, y)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "target/python-parity".to_string());
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir)?;

    // 1. The quickstart's model and SGLD-CV, shorter: 4 chains × 4 000 kept draws.
    let model = LogisticRegression::synthetic(100_000, 10, 10.0, 2026)?;
    let cv = ControlVariate::at_mode(
        &model,
        &[0.0; 10],
        &ModeSettings::default(),
        CvSettings { batch_size: 100, ..Default::default() },
    )?;
    let names: Vec<String> = (0..10).map(|j| format!("beta[{j}]")).collect();
    let fit = Sample::new(&model, Sgld::new(SgldSettings::default(), cv)?)
        .draws(4_000)
        .chains(4)
        .burn_in(1_000)
        .seed(7)
        .names(&names)
        .run()?;
    save(dir, "quickstart", &fit)?;

    // 2. A Gaussian GLM (σ unknown, positive through the layout) from arrays, plain SGLD on
    //    minibatches of 100, aiming at an accuracy of 0.5 sd (the tuner chooses the length).
    let (x, y) = data(20_000, 4, 11, |eta, z| eta + 0.8 * z);
    ndarray_npy::write_npy(dir.join("glm_x.npy"), &x)?;
    ndarray_npy::write_npy(dir.join("glm_y.npy"), &y)?;
    let glm = Glm::new(Family::Gaussian, &x, &y, &GlmSettings::default())?.constrained()?;
    let fit = Sample::new(&glm, Sgld::new(SgldSettings::default(), Minibatch::new(100))?)
        .accuracy(0.5)
        .chains(4)
        .seed(3)
        .run()?;
    save(dir, "glm_gaussian", &fit)?;

    // 3. A logistic GLM from f32 features and SGHMC-CV, a fixed run.
    let (x, y) = data(30_000, 5, 12, |eta, z| f64::from(u8::from(eta + 1.7 * z > 0.0)));
    let x32 = x.mapv(|v| v as f32);
    ndarray_npy::write_npy(dir.join("logit_x.npy"), &x32)?;
    ndarray_npy::write_npy(dir.join("logit_y.npy"), &y)?;
    let glm = Glm::new_f32(Family::Logistic, &x32, &y, &GlmSettings::default())?;
    let cv = ControlVariate::at_mode(
        &glm,
        &[0.0; 6],
        &ModeSettings::default(),
        CvSettings { batch_size: 50, ..Default::default() },
    )?;
    let fit = Sample::new(&glm, Sghmc::new(SghmcSettings::default(), cv)?)
        .draws(3_000)
        .chains(3)
        .burn_in(1_000)
        .seed(5)
        .run()?;
    save(dir, "glm_logistic_f32", &fit)?;

    println!("RESULT {{\"folder\": \"{}\", \"cases\": 3}}", dir.display());
    Ok(())
}
