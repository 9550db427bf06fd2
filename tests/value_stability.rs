//! Value stability: the first 20 draws (positions, weights, gradient estimates) of every sampler
//! for a fixed seed, on the linear-Gaussian and the logistic model, pinned bit for bit in
//! `tests/fixtures/value_stability.txt` (as rand_distr's `tests/value_stability.rs` does).
//!
//! A change of update rule, of random-number consumption or of floating-point evaluation order
//! fails here. When a change is intended, regenerate the fixture with
//! `SGMCMC_BLESS=1 cargo test --release --test suite value_stability::` and say in the commit which
//! draws changed and why.

use sgmcmc::*;
use std::collections::BTreeMap;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/value_stability.txt");
const N_DRAWS: u64 = 20;
const SEED: u64 = 2026;

fn lg() -> LinearGaussian {
    LinearGaussian::synthetic(500, 3, 1.0, 10.0, 3).unwrap()
}

fn logistic() -> LogisticRegression {
    LogisticRegression::synthetic(500, 4, 10.0, 5).unwrap()
}

fn settings() -> RunSettings {
    RunSettings {
        n_iter: N_DRAWS,
        burn_in: 0,
        thin: 1,
        n_chains: 2,
        seed: SEED,
        storage: Storage::Samples,
        parallel: false,
        ..Default::default()
    }
}

/// Positions and weights of every draw of every chain (and gradients when the sampler keeps
/// them), as bit patterns.
fn chain_bits<M: Model, S: Sampler>(model: &M, sampler: &S, theta0: &[f64]) -> Vec<u64> {
    let storage =
        if sampler_keeps_gradients(model, sampler, theta0) { Storage::SamplesAndGradients } else { Storage::Samples };
    let out = Runner::new(model, sampler).start(theta0).settings(RunSettings { storage, ..settings() }).run().unwrap();
    estimate_bits(&out.estimate)
}

fn sampler_keeps_gradients<M: Model, S: Sampler>(model: &M, sampler: &S, theta0: &[f64]) -> bool {
    let mut s = sampler.clone();
    s.init(model, theta0, &mut rng::stream(0, &[0])).unwrap();
    s.gradient().is_some()
}

fn estimate_bits(e: &Estimate) -> Vec<u64> {
    let mut bits = Vec::new();
    for c in 0..e.n_parts() {
        let s = e.samples(c).unwrap();
        bits.extend(s.draws().iter().map(|x| x.to_bits()));
        bits.extend(s.weights().iter().map(|x| x.to_bits()));
        if let Some(g) = s.gradients() {
            bits.extend(g.iter().map(|x| x.to_bits()));
        }
    }
    bits
}

fn rr_bits<M: Model, S: Discretisation>(model: &M, rr: &RichardsonRomberg<S>, theta0: &[f64]) -> Vec<u64> {
    let out = Runner::new(model, rr).start(theta0).settings(settings()).run().unwrap();
    let mut bits = estimate_bits(&out.coarse);
    bits.extend(estimate_bits(&out.fine));
    bits
}

fn sgld(gamma: f64) -> Sgld {
    Sgld::new(SgldSettings::constant(gamma), Minibatch::new(50)).unwrap()
}

fn sghmc(eta: f64) -> Sghmc {
    Sghmc::new(SghmcSettings::constant(eta, 0.1), Minibatch::new(50)).unwrap()
}

fn cv<M: Model>(model: &M, centre: &[f64]) -> ControlVariate {
    ControlVariate::at(model, centre, CvSettings { batch_size: 50, ..Default::default() }).unwrap()
}

fn spd(d: usize, scale: f64) -> ndarray::Array2<f64> {
    ndarray::Array2::from_shape_fn((d, d), |(i, j)| if i == j { scale } else { 0.3 * scale / (1 + i + j) as f64 })
}

/// Every pinned sequence, by name.
fn all_bits() -> BTreeMap<String, Vec<u64>> {
    let mut m = BTreeMap::new();
    let lg = lg();
    let lo = logistic();
    let lg_mean = lg.posterior_mean().to_vec();
    let lo_map = lo.map().unwrap().to_vec();
    let z3 = [0.0; 3];
    let z4 = [0.0; 4];
    let poly = SgldSettings { step_size: StepSize::Polynomial { gamma1: 2e-4, alpha: 0.55 } };

    m.insert("lg/sgld".into(), chain_bits(&lg, &sgld(1e-4), &z3));
    // Distributed matrix factorisation (serial simulation, 2 x 2 blocks): the final W and H.
    {
        use sgmcmc::mf::{BlockPartition, MfModel, MfRunSettings, MfUpdate, RowShard, run_mf};
        let r = Ratings::synthetic(6, 8, 2, 30, 0.5, 11).unwrap();
        let model =
            MfModel { rank: 2, noise_var: 0.25, prior_var_w: 1.0, prior_var_h: 1.0, offset: r.mean(), init_scale: 0.5 };
        let part = BlockPartition::even(6, 8, 2).unwrap();
        let shards = RowShard::split(&part, &r).unwrap();
        let run = MfRunSettings { n_iter: 40, burn_in: 0, eval_every: 0, seed: 2026 };
        let updates = [
            ("mf/sgld", MfUpdate::Sgld(SgldSettings::constant(1e-3))),
            ("mf/psgld", MfUpdate::Psgld(PsgldSettings { step_size: StepSize::Constant(1e-3), ..Default::default() })),
            (
                "mf/hamcmc",
                MfUpdate::Hamcmc(HamcmcSettings { step_size: StepSize::Constant(1e-3), ..Default::default() }),
            ),
        ];
        for (name, update) in updates {
            // The final W and H (28 numbers) after 40 and after 80 iterations.
            let mut bits = Vec::new();
            for n_iter in [40, 80] {
                let out = run_mf(&shards, &[], &model, &update, &MfRunSettings { n_iter, ..run }).unwrap();
                bits.extend(out.w.iter().chain(out.h.iter()).map(|v| v.to_bits()));
            }
            m.insert(name.into(), bits);
        }
        // Rank 5: the prediction's dot product has a four-wide block and a tail (Pmf's summation
        // order, which MF follows since it uses Pmf's terms).
        let model5 = MfModel { rank: 5, ..model };
        let out = run_mf(&shards, &[], &model5, &updates[0].1, &run).unwrap();
        m.insert("mf/sgld_rank5".into(), out.w.iter().chain(out.h.iter()).map(|v| v.to_bits()).collect());
    }
    m.insert("lo/sgld".into(), chain_bits(&lo, &sgld(1e-3), &z4));
    let wor = |g| Sgld::new(SgldSettings::constant(g), Minibatch::without_replacement(50)).unwrap();
    m.insert("lg/sgld_without_replacement".into(), chain_bits(&lg, &wor(1e-4), &z3));
    m.insert("lo/sgld_without_replacement".into(), chain_bits(&lo, &wor(1e-3), &z4));
    let poly_sgld = Sgld::new(poly, Minibatch::new(50)).unwrap();
    m.insert("lg/sgld_polynomial".into(), chain_bits(&lg, &poly_sgld, &z3));
    m.insert("lo/sgld_polynomial".into(), chain_bits(&lo, &poly_sgld, &z4));
    m.insert("lg/lmc".into(), chain_bits(&lg, &Sgld::lmc(SgldSettings::constant(1e-4)).unwrap(), &z3));
    m.insert("lo/lmc".into(), chain_bits(&lo, &Sgld::lmc(SgldSettings::constant(1e-3)).unwrap(), &z4));
    let sgnht = |h| Sgnht::new(SgnhtSettings::constant(h, 1.0), Minibatch::new(50)).unwrap();
    m.insert("lg/sgnht".into(), chain_bits(&lg, &sgnht(3e-3), &z3));
    m.insert("lo/sgnht".into(), chain_bits(&lo, &sgnht(1e-2), &z4));
    // Cycles of 8 iterations, half exploring: both stages within the 20 iterations.
    let csgld = |g| {
        CyclicalSgld::new(CyclicalSettings { step_size0: g, cycle_len: 8, exploration: 0.5 }, Minibatch::new(50))
            .unwrap()
    };
    m.insert("lg/csgld".into(), chain_bits(&lg, &csgld(2e-4), &z3));
    m.insert("lo/csgld".into(), chain_bits(&lo, &csgld(2e-3), &z4));
    let svrg = |g| Sgld::new(SgldSettings::constant(g), Svrg::new(50).with_epoch(5)).unwrap();
    m.insert("lg/sgld_svrg".into(), chain_bits(&lg, &svrg(1e-4), &z3));
    m.insert("lo/sgld_svrg".into(), chain_bits(&lo, &svrg(1e-3), &z4));
    let saga = |g| Sgld::new(SgldSettings::constant(g), Saga::new(50)).unwrap();
    m.insert("lg/sgld_saga".into(), chain_bits(&lg, &saga(1e-4), &z3));
    m.insert("lo/sgld_saga".into(), chain_bits(&lo, &saga(1e-3), &z4));
    m.insert("lg/sghmc".into(), chain_bits(&lg, &sghmc(1e-5), &z3));
    m.insert("lo/sghmc".into(), chain_bits(&lo, &sghmc(1e-4), &z4));
    let psgld =
        Psgld::new(PsgldSettings { step_size: StepSize::Constant(1e-3), ..Default::default() }, Minibatch::new(50))
            .unwrap();
    m.insert("lg/psgld".into(), chain_bits(&lg, &psgld, &z3));
    m.insert("lo/psgld".into(), chain_bits(&lo, &psgld, &z4));
    let pre3 = PreconditionedSgld::new(SgldSettings::constant(1e-4), &spd(3, 1.0), Minibatch::new(50)).unwrap();
    let pre4 = PreconditionedSgld::new(SgldSettings::constant(1e-3), &spd(4, 1.0), Minibatch::new(50)).unwrap();
    m.insert("lg/preconditioned_sgld".into(), chain_bits(&lg, &pre3, &z3));
    m.insert("lo/preconditioned_sgld".into(), chain_bits(&lo, &pre4, &z4));
    let mala = |g| Mala::new(MalaSettings::fixed(g)).unwrap();
    m.insert("lg/mala".into(), chain_bits(&lg, &mala(1e-3), &z3));
    m.insert("lo/mala".into(), chain_bits(&lo, &mala(1e-2), &z4));
    let hamcmc = |g| {
        Hamcmc::new(HamcmcSettings { step_size: StepSize::Constant(g), ..Default::default() }, Minibatch::new(50))
            .unwrap()
    };
    m.insert("lg/hamcmc".into(), chain_bits(&lg, &hamcmc(0.5), &z3));
    m.insert("lo/hamcmc".into(), chain_bits(&lo, &hamcmc(0.5), &z4));
    let sgld_cv = |e: ControlVariate, g| Sgld::new(SgldSettings::constant(g), e).unwrap();
    m.insert("lg/sgld_cv".into(), chain_bits(&lg, &sgld_cv(cv(&lg, &lg_mean), 1e-4), &lg_mean));
    m.insert("lo/sgld_cv".into(), chain_bits(&lo, &sgld_cv(cv(&lo, &lo_map), 1e-3), &lo_map));
    let sghmc_cv = |e: ControlVariate, eta| Sghmc::new(SghmcSettings::constant(eta, 0.1), e).unwrap();
    m.insert("lg/sghmc_cv".into(), chain_bits(&lg, &sghmc_cv(cv(&lg, &lg_mean), 1e-5), &lg_mean));
    m.insert("lo/sghmc_cv".into(), chain_bits(&lo, &sghmc_cv(cv(&lo, &lo_map), 1e-4), &lo_map));
    m.insert("lg/sgrrld".into(), rr_bits(&lg, &RichardsonRomberg::new(sgld(1e-4)), &z3));
    m.insert("lo/sgrrld".into(), rr_bits(&lo, &RichardsonRomberg::new(sgld(1e-3)), &z4));
    m.insert("lg/sgrrhmc".into(), rr_bits(&lg, &RichardsonRomberg::new(sghmc(1e-5)), &z3));
    m.insert("lo/sgrrhmc".into(), rr_bits(&lo, &RichardsonRomberg::new(sghmc(1e-4)), &z4));
    // The peers' methods (issue 63): the kinetic splittings, reshuffled minibatches, a replica
    // ladder (with anchors: the swaps draw energy minibatches and uniforms) and contour SGLD.
    let baoab = |h| Baoab::new(KineticSettings::constant(h, 1.0), Minibatch::new(50)).unwrap();
    m.insert("lg/baoab".into(), chain_bits(&lg, &baoab(1e-2), &z3));
    m.insert("lo/baoab".into(), chain_bits(&lo, &baoab(3e-2), &z4));
    let ubu = |h| Ubu::new(KineticSettings::constant(h, 1.0), Minibatch::new(50)).unwrap();
    m.insert("lg/ubu".into(), chain_bits(&lg, &ubu(1e-2), &z3));
    m.insert("lo/ubu".into(), chain_bits(&lo, &ubu(3e-2), &z4));
    let rr = |g| Sgld::new(SgldSettings::constant(g), Minibatch::reshuffled(45)).unwrap();
    m.insert("lg/sgld_reshuffled".into(), chain_bits(&lg, &rr(1e-4), &z3));
    m.insert("lo/sgld_reshuffled".into(), chain_bits(&lo, &rr(1e-3), &z4));
    let resgld = |g| {
        let mut s = ReSgldSettings::new(g, &[1.0, 2.0, 4.0]);
        s.energy_batch = 20;
        s.anchor_every = 7;
        ReSgld::new(s, Minibatch::new(50)).unwrap()
    };
    m.insert("lg/resgld".into(), chain_bits(&lg, &resgld(1e-4), &z3));
    m.insert("lo/resgld".into(), chain_bits(&lo, &resgld(1e-3), &z4));
    let contour = |g, u: f64| Csgld::new(CsgldSettings::new(g, u - 20.0, 2.0, 30), Minibatch::new(50)).unwrap();
    let energy = |m: &dyn Model, x: &[f64]| {
        let all: Vec<usize> = (0..m.n_data()).collect();
        m.potential_prior(x).unwrap() + m.potential_data_sum(x, &all).unwrap()
    };
    let (u_lg, u_lo) = (energy(&lg, &z3), energy(&lo, &z4));
    m.insert("lg/contour_sgld".into(), chain_bits(&lg, &contour(1e-4, u_lg), &z3));
    m.insert("lo/contour_sgld".into(), chain_bits(&lo, &contour(1e-3, u_lo), &z4));
    for (tag, coupling) in [("antithetic", MlCoupling::Antithetic), ("subsampling", MlCoupling::Subsampling)] {
        m.insert(format!("lg/mlsgld_{tag}"), mlsgld_bits(&lg, &lg_mean, 1e-4, coupling));
        m.insert(format!("lo/mlsgld_{tag}"), mlsgld_bits(&lo, &lo_map, 1e-3, coupling));
    }
    m
}

/// `Δ_l`, `g_l` and the end points of samples 0..4 of levels 0..=3, for g(θ) = θ₀ + θ₁².
fn mlsgld_bits<M: Model>(model: &M, theta0: &[f64], h0: f64, coupling: MlCoupling) -> Vec<u64> {
    let settings = MlSgldSettings { horizon: 3, coupling, seed: SEED, keep_points: true, ..Default::default() };
    let ml = MlSgld::sgld(settings, h0, Minibatch::new(50), theta0).unwrap();
    let g = |t: &[f64]| t[0] + t[1] * t[1];
    let mut bits = Vec::new();
    for level in 0..=3 {
        for i in 0..4 {
            let s = ml.sample(model, &g, level, i).unwrap();
            bits.push(s.delta.to_bits());
            bits.push(s.fine.to_bits());
            for p in &s.points {
                bits.extend(p.iter().map(|x| x.to_bits()));
            }
        }
    }
    bits
}

fn read_fixture() -> BTreeMap<String, Vec<u64>> {
    let text = std::fs::read_to_string(FIXTURE).expect("fixture tests/fixtures/value_stability.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next().unwrap().to_string();
            (name, it.map(|h| u64::from_str_radix(h, 16).unwrap()).collect())
        })
        .collect()
}

#[test]
fn first_draws_are_pinned() {
    let now = all_bits();
    if std::env::var_os("SGMCMC_BLESS").is_some() {
        let mut text = String::from(
            "# The first 20 draws of every sampler (seed 2026), as f64 bit patterns in hex.\n\
             # Written by `SGMCMC_BLESS=1 cargo test --release --test suite value_stability::`.\n",
        );
        for (name, bits) in &now {
            text.push_str(name);
            for b in bits {
                text.push_str(&format!(" {b:x}"));
            }
            text.push('\n');
        }
        std::fs::write(FIXTURE, text).unwrap();
        return;
    }
    let pinned = read_fixture();
    let mut changed = Vec::new();
    for (name, bits) in &now {
        match pinned.get(name) {
            Some(p) if p == bits => {}
            Some(_) => changed.push(format!("{name}: draws differ")),
            None => changed.push(format!("{name}: not in the fixture")),
        }
    }
    for name in pinned.keys().filter(|k| !now.contains_key(*k)) {
        changed.push(format!("{name}: pinned but no longer produced"));
    }
    assert!(changed.is_empty(), "value stability broken:\n{}", changed.join("\n"));
    // The pins are not vacuous: every sequence is long and holds distinct values.
    for (name, bits) in &pinned {
        assert!(bits.len() >= 40, "{name} has only {} values", bits.len());
        let mut distinct = bits.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > bits.len() / 4, "{name}: too few distinct values");
    }
}
