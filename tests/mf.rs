//! Block-scheduled matrix factorisation (`sgmcmc::mf`, HAMCMC §4.3): the simulated workers
//! sample the posterior (against MALA on the same `Pmf` model), runs are reproducible, and bad
//! input is a typed error.

use ndarray::Array2;
use sgmcmc::StepSize;
use sgmcmc::mf::{BlockPartition, MfModel, MfOutput, MfRunSettings, MfUpdate, RowShard, run_mf};
use sgmcmc::prelude::*;
use sgmcmc::{Error, HamcmcSettings, Mala, MalaSettings, Pmf, PsgldSettings, Ratings, SgldSettings};

const ROWS: usize = 6;
const COLS: usize = 8;
const K: usize = 2;

fn tiny() -> (Ratings, MfModel) {
    let r = Ratings::synthetic(ROWS, COLS, K, 30, 0.5, 11).unwrap();
    let model =
        MfModel { rank: K, noise_var: 0.25, prior_var_w: 1.0, prior_var_h: 1.0, offset: r.mean(), init_scale: 0.5 };
    (r, model)
}

/// The test functions, invariant under the symmetries W → WR, H → HR (R orthogonal): three
/// predictions `Wᵢ·Hⱼ` (two observed entries, one not) and `‖W‖² + ‖H‖²`.
fn functions(w: &[f64], h: &[f64]) -> [f64; 4] {
    let p = |i: usize, j: usize| (0..K).map(|k| w[i * K + k] * h[j * K + k]).sum::<f64>();
    let sq: f64 = w.iter().chain(h).map(|v| v * v).sum();
    [p(0, 0), p(3, 5), p(5, 7), sq]
}

fn final_state(out: &MfOutput) -> [f64; 4] {
    functions(out.w.as_slice().unwrap(), out.h.as_slice().unwrap())
}

/// Posterior means and MCSEs of the test functions from 4 long MALA chains on `Pmf`.
fn reference(r: &Ratings, m: &MfModel) -> [(f64, f64); 4] {
    let pmf = Pmf::new(r.clone(), K, m.noise_var, m.prior_var_w, m.prior_var_h).unwrap();
    let mala = Mala::new(MalaSettings::fixed(2e-3)).unwrap();
    let inits: Vec<Vec<f64>> = (0..4).map(|c| pmf.random_start(0.5, 100 + c)).collect();
    let s = RunSettings { n_iter: 200_000, burn_in: 20_000, thin: 5, n_chains: 4, seed: 5, ..Default::default() };
    let out = Runner::new(&pmf, &mala).starts(&inits).settings(s).run().unwrap();
    let split = ROWS * K;
    let per_chain: Vec<Vec<[f64; 4]>> = (0..4)
        .map(|c| {
            let d = out.estimate.samples(c).unwrap().draws();
            d.outer_iter()
                .map(|row| {
                    let t = row.as_slice().unwrap();
                    functions(&t[..split], &t[split..])
                })
                .collect()
        })
        .collect();
    std::array::from_fn(|q| {
        let n = per_chain[0].len();
        let a = Array2::from_shape_fn((4, n), |(c, i)| per_chain[c][i][q]);
        (a.mean().unwrap(), sgmcmc::diagnostics::mcse_mean(a.view()).unwrap())
    })
}

/// Final states of `n` independent chains (seeds 1000 + i) of the simulated B-worker sampler.
fn final_states(r: &Ratings, m: &MfModel, update: &MfUpdate, blocks: usize, n_iter: u64, n: u64) -> Vec<[f64; 4]> {
    let part = BlockPartition::even(ROWS, COLS, blocks).unwrap();
    let shards = RowShard::split(&part, r).unwrap();
    (0..n)
        .map(|i| {
            let run = MfRunSettings { n_iter, burn_in: 0, eval_every: 0, seed: 1000 + i };
            final_state(&run_mf(&shards, &[], m, update, &run).unwrap())
        })
        .collect()
}

/// DSGLD and HAMCMC over 2 and 3 simulated workers sample the posterior: the mean of each test
/// function over 300 independent chains' final states vs the MALA reference, |z| ≤ 4 with the
/// standard error of both. Steps chosen small enough that the O(h) bias is below the Monte Carlo
/// error (checked: halving them changes no mean by more than its SE).
#[test]
fn block_scheduled_chains_sample_the_posterior() {
    let (r, m) = tiny();
    let refs = reference(&r, &m);
    eprintln!("MALA reference (mean, mcse): {refs:?}");
    let cases = [
        ("DSGLD B=2", MfUpdate::Sgld(SgldSettings::constant(1e-3)), 2),
        ("DSGLD B=3", MfUpdate::Sgld(SgldSettings::constant(1e-3)), 3),
        (
            "HAMCMC B=2",
            MfUpdate::Hamcmc(HamcmcSettings {
                step_size: StepSize::Constant(2e-3),
                memory: 2,
                trust_region: 50.0,
                initial_scale: 0.5,
                warmup_step_size: 1e-3,
            }),
            2,
        ),
    ];
    let mut worst: f64 = 0.0;
    for (name, update, blocks) in cases {
        let states = final_states(&r, &m, &update, blocks, 8_000, 300);
        for (q, &(mu, se_ref)) in refs.iter().enumerate() {
            let xs: Vec<f64> = states.iter().map(|s| s[q]).collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            let z = (mean - mu) / (var / n + se_ref * se_ref).sqrt();
            eprintln!("{name} f{q}: {mean:.4} vs {mu:.4} (sd {:.3}), z = {z:.2}", var.sqrt());
            worst = worst.max(z.abs());
            assert!(z.abs() <= 4.0, "{name} f{q}: z = {z}");
        }
    }
    eprintln!("worst |z| = {worst:.2}");
}

/// The same seed gives the same chain; another seed another; the diagonal counts follow the
/// diagonal sizes; the predictive-mean RMSE trace is formed after burn-in only.
#[test]
fn runs_are_reproducible_and_traced() {
    let r = Ratings::synthetic(40, 50, 3, 800, 0.5, 3).unwrap();
    let (train, test) = r.split(0.1, 4).unwrap();
    let part = BlockPartition::even(40, 50, 4).unwrap();
    let (sh, te) = (RowShard::split(&part, &train).unwrap(), RowShard::split(&part, &test).unwrap());
    let m =
        MfModel { rank: 3, noise_var: 0.25, prior_var_w: 1.0, prior_var_h: 1.0, offset: train.mean(), init_scale: 0.1 };
    let run = MfRunSettings { n_iter: 400, burn_in: 200, eval_every: 50, seed: 9 };
    for update in [
        MfUpdate::Sgld(SgldSettings::constant(2e-4)),
        MfUpdate::Psgld(PsgldSettings { step_size: StepSize::Constant(1e-3), decay: 0.9, damping: 1e-3 }),
        MfUpdate::Hamcmc(HamcmcSettings { memory: 3, initial_scale: 1e-3, ..Default::default() }),
    ] {
        let a = run_mf(&sh, &te, &m, &update, &run).unwrap();
        let b = run_mf(&sh, &te, &m, &update, &run).unwrap();
        let c = run_mf(&sh, &te, &m, &update, &MfRunSettings { seed: 10, ..run }).unwrap();
        // Everything but the wall times.
        assert_eq!((&a.w, &a.h, &a.diagonal_counts), (&b.w, &b.h, &b.diagonal_counts), "{}", update.name());
        let rmses =
            |o: &MfOutput| o.trace.iter().map(|p| (p.iteration, p.rmse_sample, p.rmse_mean)).collect::<Vec<_>>();
        assert_eq!(rmses(&a), rmses(&b));
        assert_ne!(a.w, c.w);
        assert_eq!(a.trace.len(), 8);
        assert!(a.trace.iter().all(|p| p.rmse_mean.is_some() == (p.iteration > 200)));
        assert_eq!(
            a.diagonal_counts.iter().sum::<u64>(),
            if update.name() == "HAMCMC" { 400 + 2 * 3 + 3 - 1 } else { 400 }
        );
        eprintln!("{}: final RMSE {:.4}, counts {:?}", update.name(), a.final_rmse().unwrap(), a.diagonal_counts);
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    let (r, m) = tiny();
    let part = BlockPartition::even(ROWS, COLS, 2).unwrap();
    let sh = RowShard::split(&part, &r).unwrap();
    let run = MfRunSettings { n_iter: 10, burn_in: 0, eval_every: 0, seed: 1 };
    let sgld = MfUpdate::Sgld(SgldSettings::constant(1e-3));
    assert!(matches!(BlockPartition::even(6, 8, 0), Err(Error::InvalidParameter { name: "blocks", .. })));
    assert!(matches!(BlockPartition::even(6, 8, 7), Err(Error::InvalidParameter { name: "blocks", .. })));
    assert!(matches!(RowShard::new(&part, 2, &r), Err(Error::InvalidParameter { name: "block", .. })));
    let other = Ratings::synthetic(7, 8, 2, 10, 0.5, 1).unwrap();
    assert!(matches!(RowShard::new(&part, 0, &other), Err(Error::InvalidParameter { name: "ratings", .. })));
    let swapped = vec![sh[1].clone(), sh[0].clone()];
    assert!(matches!(run_mf(&swapped, &[], &m, &sgld, &run), Err(Error::InvalidParameter { name: "shards", .. })));
    assert!(matches!(run_mf(&sh[..1], &[], &m, &sgld, &run), Err(Error::DimensionMismatch { .. })));
    let eval = MfRunSettings { eval_every: 5, ..run };
    assert!(matches!(run_mf(&sh, &[], &m, &sgld, &eval), Err(Error::DimensionMismatch { .. })));
    assert!(matches!(
        run_mf(&sh, &[], &MfModel { rank: 0, ..m }, &sgld, &run),
        Err(Error::InvalidParameter { name: "rank", .. })
    ));
    assert!(matches!(
        run_mf(&sh, &[], &m, &MfUpdate::Sgld(SgldSettings::constant(-1.0)), &run),
        Err(Error::InvalidParameter { name: "step_size", .. })
    ));
    // A row block without ratings.
    let only_top = Ratings::new(vec![0, 1], vec![0, 1], vec![3.0, 4.0], ROWS, COLS).unwrap();
    let empty = RowShard::split(&part, &only_top).unwrap();
    assert!(matches!(run_mf(&empty, &[], &m, &sgld, &run), Err(Error::InvalidParameter { name: "shards", .. })));
    // A step far too large: a non-finite state, reported with the worker (block) and iteration.
    let err = run_mf(&sh, &[], &m, &MfUpdate::Sgld(SgldSettings::constant(10.0)), &run).unwrap_err();
    eprintln!("{err}");
    match err {
        Error::Rank { source, .. } => {
            assert!(matches!(*source, Error::NonFiniteState { .. } | Error::NonFiniteGradient { .. }))
        }
        e => panic!("unexpected {e}"),
    }
}
