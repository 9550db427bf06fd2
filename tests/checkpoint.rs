//! Stopping, checkpointing and resuming runs: a stopped run keeps exactly its draws so far; a run
//! saved at iteration k, loaded and resumed is bit-identical to an uninterrupted one; corrupt
//! files are typed errors; divergences can be reported as data.

use serde::{Serialize, de::DeserializeOwned};
use sgmcmc::observe::{Budget, Progress, StopFlag, StopWhen, WallTime};
use sgmcmc::*;

fn dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("sgmcmc-checkpoint-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bits(e: &Estimate) -> Vec<u64> {
    let mut b = Vec::new();
    for c in 0..e.n_parts() {
        let s = e.samples(c).unwrap();
        b.extend(s.draws().iter().map(|x| x.to_bits()));
        b.extend(s.weights().iter().map(|x| x.to_bits()));
        if let Some(g) = s.gradients() {
            b.extend(g.iter().map(|x| x.to_bits()));
        }
        b.extend(s.costs().unwrap().iter().copied());
    }
    b
}

fn stop_at(k: u64) -> StopWhen<impl Fn(&Progress<'_>) -> bool + Sync> {
    StopWhen { condition: move |p: &Progress<'_>| p.iteration >= k, interval: 1 }
}

/// Runs uninterrupted, and again stopped at iteration `k`, saved, loaded and resumed: the two
/// must agree bit for bit (draws, weights, gradients, per-draw costs, total cost).
fn check_resume<M: Model, S: Sampler + Serialize + DeserializeOwned>(
    name: &str,
    model: &M,
    sampler: &S,
    theta0: &[f64],
    settings: &RunSettings,
    k: u64,
) {
    let full = Runner::new(model, sampler).start(theta0).settings(*settings).run().unwrap();
    let stopped =
        Runner::new(model, sampler).start(theta0).settings(*settings).observers(&[&stop_at(k)]).run().unwrap();
    assert!(!stopped.is_complete(), "{name}");
    assert!(stopped.chains.iter().all(|c| c.iterations == k && c.stopped), "{name}");
    let path = dir().join(format!("{name}.ckpt"));
    stopped.save(&path).unwrap();
    let loaded = RunOutput::<S>::load(&path).unwrap();
    let resumed = Resume::new(model, loaded).run().unwrap();
    assert!(resumed.is_complete(), "{name}");
    assert_eq!(bits(&resumed.estimate), bits(&full.estimate), "{name}: resumed draws differ");
    assert_eq!(resumed.cost, full.cost, "{name}: cost differs");
    for (a, b) in resumed.chains.iter().zip(&full.chains) {
        assert_eq!(a.iterations, b.iterations);
        assert_eq!(
            a.sampler.position().iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            b.sampler.position().iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn resumed_runs_are_bit_identical() {
    let lo = LogisticRegression::synthetic(2_000, 4, 10.0, 3).unwrap();
    let map = lo.map().unwrap().to_vec();
    let settings = RunSettings {
        n_iter: 3_000,
        burn_in: 500,
        thin: 2,
        n_chains: 3,
        seed: 8,
        storage: Storage::SamplesAndGradients,
        ..Default::default()
    };
    // SGLD, stopped during burn-in and after it.
    let sgld = Sgld::new(SgldSettings::constant(1e-3), Minibatch::new(50)).unwrap();
    check_resume("sgld", &lo, &sgld, &[0.0; 4], &settings, 300);
    check_resume("sgld_after_burn_in", &lo, &sgld, &[0.0; 4], &settings, 1_777);
    // SGHMC-CV (its estimator shares a centre between chains).
    let cv = ControlVariate::at(&lo, &map, CvSettings { batch_size: 50, ..Default::default() }).unwrap();
    let sghmc_cv = Sghmc::new(SghmcSettings::constant(1e-5, 0.1), cv).unwrap();
    check_resume("sghmc_cv", &lo, &sghmc_cv, &map, &settings, 1_234);
    // SGLD as `tune` returns it: whitened, its injected noise corrected by a measured noise.
    let p = sgmcmc::tune::precondition(&lo, &sgld, &[0.0; 4], &sgmcmc::tune::TuneSettings::default()).unwrap();
    let w = p.whitening.clone().unwrap();
    let mut rng = sgmcmc::rng::stream(3, &[0]);
    let (noise, _) = GradientNoise::estimate(&lo, &Minibatch::new(50), &w, 500, &mut rng).unwrap();
    let corrected = Sgld::new(SgldSettings::constant(2e-2), Minibatch::new(50))
        .unwrap()
        .with_whitening(Some(w))
        .with_gradient_noise(Some(noise.into()));
    check_resume("sgld_noise_corrected", &lo, &corrected, &p.mode, &settings, 1_100);
    // pSGLD likewise (its metric scratch is not stored: sized again on the first resumed step).
    let psgld_corrected =
        Psgld::new(PsgldSettings { step_size: StepSize::Constant(1e-6), ..Default::default() }, Minibatch::new(50))
            .unwrap()
            .with_whitening(p.whitening.clone())
            .with_gradient_noise(corrected.gradient_noise().cloned());
    check_resume("psgld_noise_corrected", &lo, &psgld_corrected, &p.mode, &settings, 1_200);
    // A model on the constrained scale (GLM, σ > 0 through its layout) and a tempered one: a
    // resume needs nothing but the model.
    let glm = Glm::synthetic(Family::Gaussian, 1_000, 2, 4).unwrap().constrained().unwrap();
    let sgld_glm = Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(50)).unwrap();
    check_resume("constrained_glm", &glm, &sgld_glm, &[0.0; 4], &settings, 999);
    let cold = Tempered::new(&lo, Temperature::posterior(0.5)).unwrap();
    check_resume("tempered", &cold, &sgld, &[0.0; 4], &settings, 1_500);
    // HAMCMC (L-BFGS memory, history ring, pair iterations).
    let hamcmc =
        Hamcmc::new(HamcmcSettings { step_size: StepSize::Constant(0.2), ..Default::default() }, Minibatch::new(50))
            .unwrap();
    check_resume("hamcmc", &lo, &hamcmc, &map, &settings, 1_001);
    // The peers' methods: kinetic splittings (the velocity, BAOAB's owed half kick), a
    // reshuffling minibatch (the epoch's permutation and position), replica exchange (every
    // replica, the swap counts, the anchors) and contour SGLD (the learned PDF).
    let baoab = Baoab::new(KineticSettings::constant(0.05, 1.0), Minibatch::reshuffled(50)).unwrap();
    check_resume("baoab_reshuffled", &lo, &baoab, &map, &settings, 1_301);
    let ubu = Ubu::new(KineticSettings::constant(0.05, 1.0), Minibatch::new(50)).unwrap();
    check_resume("ubu", &lo, &ubu, &map, &settings, 1_302);
    let mut re = ReSgldSettings::new(1e-3, &[1.0, 3.0, 9.0]);
    re.anchor_every = 100;
    let resgld = ReSgld::new(re, Minibatch::new(50)).unwrap();
    check_resume("resgld", &lo, &resgld, &map, &settings, 1_303);
    let all: Vec<usize> = (0..lo.n_data()).collect();
    let u = lo.potential_prior(&map).unwrap() + lo.potential_data_sum(&map, &all).unwrap();
    let csgld = Csgld::new(CsgldSettings::new(1e-3, u - 5.0, 1.0, 30), Minibatch::new(50)).unwrap();
    check_resume("csgld", &lo, &csgld, &map, &settings, 1_304);
    // Streaming moments, without-replacement minibatches (the permutation is state), pSGLD.
    let moments = RunSettings { storage: Storage::Moments, ..settings };
    let psgld = Psgld::new(
        PsgldSettings { step_size: StepSize::Constant(1e-3), ..Default::default() },
        Minibatch::without_replacement(40),
    )
    .unwrap();
    let full = Runner::new(&lo, &psgld).start(&map).settings(moments).run().unwrap();
    let stopped = Runner::new(&lo, &psgld).start(&map).settings(moments).observers(&[&stop_at(2_100)]).run().unwrap();
    let path = dir().join("psgld_moments.ckpt");
    stopped.save(&path).unwrap();
    let resumed = Resume::new(&lo, RunOutput::<Psgld>::load(&path).unwrap()).run().unwrap();
    let (a, b) = (resumed.estimate.covariance().unwrap(), full.estimate.covariance().unwrap());
    assert_eq!(a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), b.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn resumed_richardson_romberg_is_bit_identical() {
    let lg = LinearGaussian::synthetic(1_000, 2, 1.0, 10.0, 5).unwrap();
    let rr = RichardsonRomberg::new(Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50)).unwrap());
    let settings = RunSettings { n_iter: 2_000, burn_in: 200, n_chains: 2, seed: 4, ..Default::default() };
    let full = Runner::new(&lg, &rr).start(&[0.0, 0.0]).settings(settings).run().unwrap();
    let stopped =
        Runner::new(&lg, &rr).start(&[0.0, 0.0]).settings(settings).observers(&[&stop_at(777)]).run().unwrap();
    assert_eq!(stopped.iterations, vec![777, 777]);
    let path = dir().join("sgrrld.ckpt");
    stopped.save(&path).unwrap();
    let resumed = Resume::new(&lg, RrOutput::<Sgld>::load(&path).unwrap()).run().unwrap();
    assert!(resumed.is_complete());
    assert_eq!(bits(&resumed.coarse), bits(&full.coarse));
    assert_eq!(bits(&resumed.fine), bits(&full.fine));
    assert_eq!(resumed.cost, full.cost);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn resumed_multilevel_run_is_bit_identical() {
    let m = LogisticRegression::synthetic(500, 3, 1.0, 7).unwrap();
    let map = m.map().unwrap();
    let g = |t: &[f64]| t[0] + t[1] * t[2];
    let settings = MlSgldSettings { keep_points: true, ..Default::default() };
    let ml = MlSgld::sgld(settings, 1.0 / 500.0, Minibatch::new(10), map.as_slice().unwrap()).unwrap();
    let plan = [300, 200, 100];
    let full = ml.run_fixed(&m, &g, &plan).unwrap();
    let mut ck = ml.start_fixed(&plan).unwrap();
    assert!(!ml.advance_fixed(&m, &g, &mut ck, 350).unwrap());
    assert_eq!(ck.samples_done(), vec![300, 50, 0]);
    let path = dir().join("mlsgld.ckpt");
    ck.save(&path).unwrap();
    let mut loaded = MlmcCheckpoint::load(&path).unwrap();
    assert_eq!(loaded, ck);
    assert!(ml.advance_fixed(&m, &g, &mut loaded, usize::MAX).unwrap());
    let resumed = ml.result(&m, &loaded).unwrap();
    assert_eq!(resumed.estimate.to_bits(), full.estimate.to_bits());
    assert_eq!(resumed.variance.to_bits(), full.variance.to_bits());
    assert_eq!(resumed.levels, full.levels);
    assert_eq!(resumed.cost, full.cost);
    assert_eq!(bits_measure(&resumed), bits_measure(&full));
    // A checkpoint of another run is refused.
    let other = MlSgld::sgld(settings, 1.0 / 400.0, Minibatch::new(10), map.as_slice().unwrap()).unwrap();
    assert!(matches!(other.advance_fixed(&m, &g, &mut loaded, 1), Err(Error::CheckpointMismatch { .. })));
    std::fs::remove_file(&path).unwrap();
}

fn bits_measure(r: &MlmcResult) -> Vec<u64> {
    let e = r.measure.as_ref().unwrap();
    let s = e.samples(0).unwrap();
    s.draws().iter().chain(s.weights().iter()).map(|x| x.to_bits()).collect()
}

/// A budget observer returns exactly the draws up to where it stopped: the stopped run's draws
/// are the uninterrupted run's first draws, bit for bit.
#[test]
fn a_budget_stop_returns_exactly_the_draws_so_far() {
    let lg = LinearGaussian::synthetic(1_000, 3, 1.0, 10.0, 9).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(100)).unwrap();
    let settings = RunSettings { n_iter: 4_000, burn_in: 100, n_chains: 2, seed: 3, ..Default::default() };
    let full = Runner::new(&lg, &sgld).start(&[0.0; 3]).settings(settings).run().unwrap();
    // 100 per step and 100 for the initial gradient: 150 000 per chain stops at iteration 1 499.
    let out = Runner::new(&lg, &sgld)
        .start(&[0.0; 3])
        .settings(settings)
        .observers(&[&Budget::datum_gradients(300_000)])
        .run()
        .unwrap();
    assert_eq!(out.cost.datum_gradients, 300_000);
    for c in 0..2 {
        assert_eq!(out.chains[c].iterations, 1_499);
        assert!(out.chains[c].stopped);
        let kept = out.estimate.samples(c).unwrap();
        let all = full.estimate.samples(c).unwrap();
        assert_eq!(kept.len(), 1_399);
        assert_eq!(kept.draws(), all.draws().slice_axis(ndarray::Axis(0), ndarray::Slice::from(..1_399)));
        assert_eq!(
            kept.costs().unwrap(),
            all.costs().unwrap().slice_axis(ndarray::Axis(0), ndarray::Slice::from(..1_399))
        );
    }
    // A wall-time limit already reached: every chain stops at its first check.
    let out = Runner::new(&lg, &sgld)
        .start(&[0.0; 3])
        .settings(settings)
        .observers(&[&WallTime::new(std::time::Duration::ZERO)])
        .run()
        .unwrap();
    assert!(out.chains.iter().all(|c| c.iterations == 1 && c.stopped));
    // A stop flag raised before the run: every chain stops at its start, with nothing drawn.
    let flag = StopFlag::new(1);
    flag.raise();
    let out = Runner::new(&lg, &sgld).start(&[0.0; 3]).settings(settings).observers(&[&flag]).run().unwrap();
    assert!(out.chains.iter().all(|c| c.iterations == 0 && c.stopped));
    assert_eq!(out.estimate.n_samples(), 0);
    // ... and the run goes on from there when resumed.
    let resumed = Resume::new(&lg, out).run().unwrap();
    assert_eq!(bits(&resumed.estimate), bits(&full.estimate));
}

#[test]
fn corrupt_and_mismatched_checkpoints_are_typed_errors() {
    let lg = LinearGaussian::synthetic(200, 2, 1.0, 10.0, 1).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(20)).unwrap();
    let settings = RunSettings { n_iter: 500, burn_in: 50, n_chains: 2, ..Default::default() };
    let out = Runner::new(&lg, &sgld).start(&[0.0; 2]).settings(settings).observers(&[&stop_at(200)]).run().unwrap();
    let path = dir().join("good.ckpt");
    out.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let write = |name: &str, b: &[u8]| {
        let p = dir().join(name);
        std::fs::write(&p, b).unwrap();
        p
    };
    // Truncated anywhere: a typed error.
    for cut in [0, 5, 12, 40, bytes.len() / 2, bytes.len() - 1] {
        let e = RunOutput::<Sgld>::load(write("truncated.ckpt", &bytes[..cut])).unwrap_err();
        assert!(matches!(e, Error::CorruptCheckpoint { .. }), "cut at {cut}: {e:?}");
    }
    // One byte altered anywhere in the payload (here: inside the draws, and in the header).
    for at in [20, bytes.len() / 2, bytes.len() - 3] {
        let mut t = bytes.clone();
        t[at] ^= 0x10;
        let e = RunOutput::<Sgld>::load(write("tampered.ckpt", &t)).unwrap_err();
        assert!(matches!(e, Error::CorruptCheckpoint { .. }), "byte {at}: {e:?}");
    }
    // A version byte that names no format of this crate: corrupt, not "older".
    let mut t = bytes.clone();
    t[8] = 99;
    let e = RunOutput::<Sgld>::load(write("version.ckpt", &t)).unwrap_err();
    assert!(matches!(&e, Error::CorruptCheckpoint { reason } if reason.contains("not a format of this crate")), "{e}");
    // A version byte corrupted into an older format's (6 -> 4): the checksum covers the version,
    // so it is corrupt too, not "older".
    let mut t = bytes.clone();
    t[8] = 4;
    let e = RunOutput::<Sgld>::load(write("version.ckpt", &t)).unwrap_err();
    assert!(matches!(e, Error::CorruptCheckpoint { .. }), "{e}");
    // A genuine older file (format 4, its checksum after the version, as formats 1-5 wrote it):
    // refused as an older format.
    let mut t = bytes.clone();
    t[8] = 4;
    let end = t.len() - 4;
    let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(&t[12..end]);
    t[end..].copy_from_slice(&crc.to_le_bytes());
    let e = RunOutput::<Sgld>::load(write("version.ckpt", &t)).unwrap_err();
    assert!(matches!(e, Error::CheckpointMismatch { what: "format version", .. }), "{e}");
    assert!(e.to_string().contains("an older format"), "{e}");
    // A format 5 file (the same body, its checksum after the version) still loads.
    t[8] = 5;
    let five = RunOutput::<Sgld>::load(write("version.ckpt", &t)).expect("format 5 loads");
    assert_eq!(
        bits(&five.estimate.part(0).unwrap()),
        bits(&RunOutput::<Sgld>::load(&path).unwrap().estimate.part(0).unwrap())
    );
    // Another sampler, another kind of run.
    assert!(matches!(RunOutput::<Sghmc>::load(&path), Err(Error::CheckpointMismatch { what: "sampler type", .. })));
    assert!(matches!(RrOutput::<Sgld>::load(&path), Err(Error::CheckpointMismatch { what: "kind of run", .. })));
    // Not a checkpoint at all; a missing file.
    assert!(matches!(
        RunOutput::<Sgld>::load(write("text.ckpt", b"hello, world")),
        Err(Error::CorruptCheckpoint { .. })
    ));
    assert!(matches!(RunOutput::<Sgld>::load(dir().join("missing.ckpt")), Err(Error::Io { .. })));
    // A model of another dimension on resume.
    let other = LinearGaussian::synthetic(200, 3, 1.0, 10.0, 1).unwrap();
    let loaded = RunOutput::<Sgld>::load(&path).unwrap();
    let bytes_before = bits(&loaded.estimate.part(0).unwrap());
    let e = Resume::new(&other, loaded).run().unwrap_err();
    assert!(matches!(e.root(), Error::DimensionMismatch { .. }), "{e:?}");
    // The refused run comes back unchanged with the error.
    let back: RunOutput<Sgld> = e.into_output().expect("the run is handed back");
    assert_eq!(bits(&back.estimate.part(0).unwrap()), bytes_before);
}

/// A model whose gradient is NaN wherever −5 < θ₀ < −4: a chain started at θ₀ = −10 crosses
/// that band on its way to the posterior; chains started at the posterior mean never go there.
struct Cliff(LinearGaussian);

impl Model for Cliff {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn n_data(&self) -> usize {
        self.0.n_data()
    }
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> Result<()> {
        self.0.grad_prior(theta, out)?;
        Ok(())
    }
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> Result<()> {
        self.0.grad_data_sum(theta, idx, out)?;
        if theta[0] > -5.0 && theta[0] < -4.0 {
            out[0] = f64::NAN;
        }
        Ok(())
    }
}

#[test]
fn divergences_can_be_reported_as_data() {
    let lg = LinearGaussian::synthetic(500, 2, 1.0, 10.0, 2).unwrap();
    let mu = lg.posterior_mean().to_vec();
    let model = Cliff(lg);
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50)).unwrap();
    let far = [-10.0, mu[1]];
    let inits: Vec<&[f64]> = vec![&mu, &far, &mu];
    let settings = RunSettings { n_iter: 2_000, burn_in: 100, n_chains: 3, seed: 5, ..Default::default() };
    // Default: the run fails, naming the chain.
    let e = Runner::new(&model, &sgld).starts(&inits).settings(settings).run().unwrap_err();
    assert_eq!(e.chain(), Some(1), "{e:?}");
    assert!(matches!(e.root(), Error::NonFiniteGradient { .. }));
    // The draws are kept with the error: chains 0 and 2 whole, chain 1 up to its divergence.
    let kept: &RunOutput<Sgld> = e.output().expect("the output is kept");
    assert_eq!(kept.estimate.n_parts(), 2);
    assert_eq!((kept.divergences.len(), kept.divergences[0].chain), (1, 1));
    // Report: chain 1 is reported with its iteration; chains 0 and 2 are returned, unchanged.
    let report = RunSettings { on_divergence: OnDivergence::Report, ..settings };
    let out = Runner::new(&model, &sgld).starts(&inits).settings(report).run().unwrap();
    assert_eq!(out.divergences.len(), 1);
    let div = &out.divergences[0];
    let Error::NonFiniteGradient { iteration } = *e.root() else { unreachable!() };
    assert_eq!((div.chain, div.iteration, div.non_finite_state), (1, iteration, false));
    assert!(out.chains[1].diverged && !out.chains[0].diverged && !out.chains[2].diverged);
    assert_eq!(out.estimate.n_parts(), 2);
    let healthy =
        Runner::new(&model, &sgld).starts(&[&mu, &mu]).settings(RunSettings { n_chains: 2, ..settings }).run().unwrap();
    assert_eq!(bits(&out.estimate.part(0).unwrap()), bits(&healthy.estimate.part(0).unwrap()));
    // Everything diverges: the first error comes back, with every chain's draws up to its
    // divergence and where each stopped.
    let all_far: Vec<&[f64]> = vec![&far, &far];
    let e = Runner::new(&model, &sgld)
        .starts(&all_far)
        .settings(RunSettings { n_chains: 2, burn_in: 0, ..report })
        .run()
        .unwrap_err();
    assert_eq!(e.chain(), Some(0), "{e:?}");
    let kept: RunOutput<Sgld> = e.into_output().expect("the draws are kept");
    assert_eq!(kept.divergences.len(), 2);
    for (c, div) in kept.divergences.iter().enumerate() {
        assert_eq!(div.chain, c);
        assert_eq!(kept.chains[c].iterations + 1, div.iteration);
        let drawn = div.draws[0].samples(0).expect("stored draws").len() as u64;
        assert_eq!(drawn, kept.chains[c].iterations, "chain {c}: every draw before the divergence");
        assert!(drawn > 0);
    }
}

/// Resuming with a model of the same dimension but other data is a typed error naming what
/// differs (before this check, SGLD-CV resumed with 1 000 data instead of 2 000 panicked on a
/// slice index), for plain runs, Richardson–Romberg runs and multilevel runs; the right model
/// resumes.
#[test]
fn resuming_with_another_model_is_a_typed_error() {
    let m = LogisticRegression::synthetic(2_000, 3, 10.0, 11).unwrap();
    let fewer = LogisticRegression::synthetic(1_000, 3, 10.0, 11).unwrap();
    let other = LogisticRegression::synthetic(2_000, 3, 10.0, 12).unwrap();
    let cv = ControlVariate::at_mode(
        &m,
        &[0.0; 3],
        &ModeSettings::default(),
        CvSettings { batch_size: 20, ..Default::default() },
    )
    .unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), cv).unwrap();
    let settings = RunSettings { n_iter: 400, burn_in: 50, n_chains: 2, ..Default::default() };
    let out = Runner::new(&m, &sgld).start(&[0.0; 3]).settings(settings).observers(&[&stop_at(200)]).run().unwrap();
    let path = dir().join("model-mismatch.ckpt");
    out.save(&path).unwrap();
    type S = Sgld<ControlVariate>;
    let e = Resume::new(&fewer, RunOutput::<S>::load(&path).unwrap()).run().unwrap_err();
    assert!(matches!(e.root(), Error::CheckpointMismatch { what: "model data size (number of data)", .. }), "{e:?}");
    assert!(e.to_string().contains("2000 in the checkpoint"), "{e}");
    let e = Resume::new(&other, RunOutput::<S>::load(&path).unwrap()).run().unwrap_err();
    assert!(
        matches!(e.root(), Error::CheckpointMismatch { what, .. } if what.starts_with("model data (fingerprint")),
        "{e:?}"
    );
    // The same model at another temperature is another model (its gradients differ).
    let hot = Tempered::new(&m, Temperature::posterior(2.0)).unwrap();
    let e = Resume::new(&hot, RunOutput::<S>::load(&path).unwrap()).run().unwrap_err();
    assert!(
        matches!(e.root(), Error::CheckpointMismatch { what, .. } if what.starts_with("model data (fingerprint")),
        "{e:?}"
    );
    // At another prior temperature alone (the data's gradients are the same): the prior's
    // fingerprint differs.
    let cold_prior = Tempered::new(&m, Temperature::new(1.0, 0.5)).unwrap();
    let e = Resume::new(&cold_prior, RunOutput::<S>::load(&path).unwrap()).run().unwrap_err();
    assert!(
        matches!(e.root(), Error::CheckpointMismatch { what, .. } if what.starts_with("model prior (fingerprint")),
        "{e:?}"
    );
    assert!(e.to_string().contains("prior: weighted sum"), "{e}");
    assert!(Resume::new(&m, RunOutput::<S>::load(&path).unwrap()).run().unwrap().is_complete());

    let rr = RichardsonRomberg::new(Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(20)).unwrap());
    let stopped = Runner::new(&m, &rr).start(&[0.0; 3]).settings(settings).observers(&[&stop_at(100)]).run().unwrap();
    stopped.save(&path).unwrap();
    let e = Resume::new(&fewer, RrOutput::<Sgld>::load(&path).unwrap()).run().unwrap_err();
    assert!(matches!(e.root(), Error::CheckpointMismatch { what: "model data size (number of data)", .. }), "{e:?}");
    assert!(e.output::<RrOutput<Sgld>>().is_some(), "the replicates are handed back");
    assert!(Resume::new(&m, RrOutput::<Sgld>::load(&path).unwrap()).run().unwrap().is_complete());

    let g = |t: &[f64]| t[0];
    let ml = MlSgld::sgld(MlSgldSettings::default(), 1.0 / 2_000.0, Minibatch::new(10), &[0.0; 3]).unwrap();
    let mut ck = ml.start_fixed(&[40, 20]).unwrap();
    ml.advance_fixed(&m, &g, &mut ck, 30).unwrap();
    ck.save(&path).unwrap();
    let mut loaded = MlmcCheckpoint::load(&path).unwrap();
    let e = ml.advance_fixed(&other, &g, &mut loaded, usize::MAX).unwrap_err();
    assert!(
        matches!(e.root(), Error::CheckpointMismatch { what, .. } if what.starts_with("model data (fingerprint")),
        "{e:?}"
    );
    assert!(ml.advance_fixed(&m, &g, &mut loaded, usize::MAX).unwrap());
    std::fs::remove_file(&path).unwrap();
}

/// Temporary files beside `path` (`<name>.<pid>.<n>.tmp`).
fn temporaries(path: &std::path::Path) -> Vec<String> {
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.starts_with(&format!("{name}.")) && f.ends_with(".tmp"))
        .collect()
}

/// Four threads saving to one path at once, 25 times each: every save succeeds, the file loads,
/// and no temporary file is left; two different runs saving at once leave one of them whole.
#[test]
fn concurrent_saves_to_one_path_all_succeed() {
    let lg = LinearGaussian::synthetic(200, 2, 1.0, 10.0, 1).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(20)).unwrap();
    let settings = RunSettings { n_iter: 2_000, burn_in: 0, n_chains: 2, ..Default::default() };
    let out = Runner::new(&lg, &sgld).start(&[0.0; 2]).settings(settings).run().unwrap();
    let path = dir().join("concurrent.ckpt");
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..25 {
                    out.save(&path).unwrap();
                }
            });
        }
    });
    let loaded = RunOutput::<Sgld>::load(&path).unwrap();
    assert_eq!(bits(&loaded.estimate), bits(&out.estimate));
    assert!(temporaries(&path).is_empty(), "{:?}", temporaries(&path));
    // Two different runs saving to the path at once (two processes resuming into one file, say):
    // not refused — the documented outcome is that the last rename wins, and the file is always
    // one whole checkpoint, bit-identical to one of the two, never a mix.
    let other = Runner::new(&lg, &sgld).start(&[0.0; 2]).settings(RunSettings { seed: 99, ..settings }).run().unwrap();
    assert_ne!(bits(&other.estimate), bits(&out.estimate));
    for _ in 0..5 {
        std::thread::scope(|s| {
            for run in [&out, &other] {
                s.spawn(|| {
                    for _ in 0..20 {
                        run.save(&path).unwrap();
                    }
                });
            }
        });
        let got = bits(&RunOutput::<Sgld>::load(&path).unwrap().estimate);
        assert!(got == bits(&out.estimate) || got == bits(&other.estimate), "a mix of two checkpoints");
    }
    std::fs::remove_file(&path).unwrap();
}

/// The process [`a_save_killed_mid_write_leaves_the_previous_checkpoint`] kills: saves a large
/// run to `$SGMCMC_CHILD_SAVE` over and over, saying `saving` before each save.
#[test]
#[ignore = "run by a_save_killed_mid_write_leaves_the_previous_checkpoint in a child process"]
fn child_saves_until_killed() {
    let Ok(path) = std::env::var("SGMCMC_CHILD_SAVE") else { return };
    let lg = LinearGaussian::synthetic(200, 20, 1.0, 10.0, 1).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(20)).unwrap();
    let settings = RunSettings { n_iter: 50_000, burn_in: 0, n_chains: 4, ..Default::default() };
    let out = Runner::new(&lg, &sgld).start(&[0.0; 20]).settings(settings).run().unwrap();
    let start = std::time::Instant::now();
    loop {
        println!("saving {}", start.elapsed().as_micros());
        out.save(&path).unwrap();
    }
}

/// A process killed (SIGKILL) while it writes a checkpoint leaves under the path a checkpoint
/// that loads — the previous one or the complete new one — at every one of several kill times;
/// the temporary it leaves is removed by loading that path (and by the next save to it).
#[test]
fn a_save_killed_mid_write_leaves_the_previous_checkpoint() {
    use std::io::BufRead;
    let lg = LinearGaussian::synthetic(200, 20, 1.0, 10.0, 1).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(20)).unwrap();
    let small = Runner::new(&lg, &sgld)
        .start(&[0.0; 20])
        .settings(RunSettings { n_iter: 100, burn_in: 0, ..Default::default() })
        .run()
        .unwrap();
    let path = dir().join("killed.ckpt");
    let mut left_temporary = 0;
    // Kill at these fractions of one save's duration after a save begins (mostly the encoding),
    // or (None) as soon as the save's temporary file appears (while it is written and flushed).
    let kills = [Some(0.2), Some(0.5), Some(0.8), None, None, None];
    for kill in kills {
        small.save(&path).unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "checkpoint::child_saves_until_killed", "--ignored", "--nocapture", "--test-threads=1"])
            .env("SGMCMC_CHILD_SAVE", &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut began = || -> u64 {
            loop {
                let line = lines.next().expect("the child ended early").unwrap();
                if let Some(t) = line.strip_prefix("saving ") {
                    return t.trim().parse().unwrap();
                }
            }
        };
        // The first save's duration, then a kill inside the third.
        let (t0, t1) = (began(), began());
        let _ = began();
        match kill {
            Some(f) => std::thread::sleep(std::time::Duration::from_micros(((t1 - t0) as f64 * f) as u64)),
            None => {
                let waited = std::time::Instant::now();
                while temporaries(&path).is_empty() && waited.elapsed().as_secs() < 10 {}
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        left_temporary += usize::from(!temporaries(&path).is_empty());
        let loaded = RunOutput::<Sgld>::load(&path).unwrap_or_else(|e| panic!("after a kill ({kill:?}): {e}"));
        let k = loaded.chains[0].iterations;
        assert!(k == 100 || k == 50_000, "{k}");
        // Loading removes the temporary the killed save left (since 2026-11-28).
        assert!(temporaries(&path).is_empty(), "a killed save's temporary survived loading");
    }
    eprintln!("kills that left a partial temporary file: {left_temporary} of {}", kills.len());
    // At least one kill must have hit the writing of the file, or the test proved nothing.
    assert!(left_temporary > 0, "no kill hit a save while its file was written");
    small.save(&path).unwrap();
    assert!(temporaries(&path).is_empty(), "a killed save's temporary survived the next save");
    std::fs::remove_file(&path).unwrap();
}

/// A pid no process has (searched downwards from the kernel's largest).
fn dead_pid() -> u32 {
    let max: u32 =
        std::fs::read_to_string("/proc/sys/kernel/pid_max").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(32_768);
    (2..max).rev().find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists()).unwrap()
}

/// A temporary abandoned by a killed save is removed by loading that file, and
/// `checkpoint::clean_temporaries` removes those of every file in a directory (not a live
/// process's, nor files of other shapes).
#[test]
fn loading_and_clean_temporaries_remove_abandoned_temporaries() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let lg = LinearGaussian::synthetic(200, 2, 1.0, 10.0, 1).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(20)).unwrap();
    let out = Runner::new(&lg, &sgld)
        .start(&[0.0; 2])
        .settings(RunSettings { n_iter: 200, burn_in: 0, ..Default::default() })
        .run()
        .unwrap();
    let d = dir().join("temporaries");
    std::fs::create_dir_all(&d).unwrap();
    let path = d.join("a.ckpt");
    out.save(&path).unwrap();
    let pid = dead_pid();
    let stale = |name: &str, n: u32| d.join(format!("{name}.{pid}.{n}.tmp"));
    for (name, n) in [("a.ckpt", 0), ("b.ckpt", 1), ("c.ckpt", 2)] {
        std::fs::write(stale(name, n), b"partial").unwrap();
    }
    let live = d.join(format!("b.ckpt.{}.7.tmp", std::process::id()));
    let other = d.join("notes.tmp");
    std::fs::write(&live, b"mine").unwrap();
    std::fs::write(&other, b"not a checkpoint temporary").unwrap();
    // Loading a.ckpt removes a.ckpt's temporary only.
    RunOutput::<Sgld>::load(&path).unwrap();
    assert!(!stale("a.ckpt", 0).exists());
    assert!(stale("b.ckpt", 1).exists() && stale("c.ckpt", 2).exists());
    // The cleanup call removes the rest of the dead process's, nothing else.
    assert_eq!(checkpoint::clean_temporaries(&d).unwrap(), 2);
    assert!(!stale("b.ckpt", 1).exists() && !stale("c.ckpt", 2).exists());
    assert!(live.exists() && other.exists() && path.exists());
    std::fs::remove_dir_all(&d).unwrap();
}
