//! MPI tests (feature `mpi`, no libtest harness: MPI is initialised once per process and every
//! rank must make the same collective calls in the same order). Run them through
//! `scripts/test-mpi`, which runs this binary under `mpirun -np 2` and `-np 4`; started without
//! `mpirun` it runs as one rank and the same checks hold.
//!
//! Checks, on every rank:
//! 1. chains over ranks: `run_chains_mpi` gives draws, weights, pooled mean and costs
//!    bit-identical to `run_chains` in this process (SGLD and SGHMC, 5 chains over R ranks);
//!    `run_rr_mpi` likewise against `run_rr` (5 SGRRLD pairs); `MlSgld::run_fixed_mpi` and
//!    `run_adaptive_mpi` against `MlSgld::run_fixed` / `run_adaptive` (whole results);
//! 2. sharded data: SGLD and SGLD-CV on a `Sharded` logistic model follow the single-process
//!    chain on the whole data set to ≤ 1e-12 relative over 2 000 iterations, and every rank holds
//!    the same chain bit for bit;
//! 3. failures: a model that fails on the last rank makes every rank return an error naming that
//!    rank (chains over ranks, and sharded), with no hang (the script's time limit);
//! 4. mismatched shards (another dimension, an empty shard) are errors on every rank at start;
//!    With feature `zarr` too, `write_zarr_mpi` writes that run's trace from all ranks and every
//!    rank reads back the serial draws.
//! 5. distributed matrix factorisation (HAMCMC §4.3, B = R blocks): DSGLD, pSGLD and HAMCMC
//!    (M = 2 and 3) by `run_mf_mpi` give the same chain, bit for bit (final W and H, every test
//!    RMSE, the diagonal counts), as `mf::run_mf` of the same B workers in this process; a rank
//!    whose ratings make its state overflow and a rank with other settings are errors on every
//!    rank naming it.
#![cfg(feature = "mpi")]

use sgmcmc::distributed::{Cluster, Sharded, run_mf_mpi, run_sharded};
use sgmcmc::mf::{BlockPartition, MfModel, MfOutput, MfRunSettings, MfUpdate, RowShard, run_mf};
use sgmcmc::ndarray::{Array1, s};
use sgmcmc::*;
use std::sync::atomic::{AtomicU64, Ordering};

fn bits(e: &Estimate) -> Vec<u64> {
    let mut v = Vec::new();
    for c in 0..e.n_parts() {
        let s = e.samples(c).expect("samples");
        v.extend(s.draws().iter().map(|x| x.to_bits()));
        v.extend(s.weights().iter().map(|x| x.to_bits()));
    }
    v
}

/// Whether two pooled means are equal bit for bit.
fn same_mean(a: &Estimate, b: &Estimate) -> bool {
    let (ma, mb) = (a.mean().expect("mean"), b.mean().expect("mean"));
    ma.iter().zip(mb.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
}

struct Report {
    rank: usize,
    failures: Vec<String>,
}

impl Report {
    fn check(&mut self, name: &str, ok: bool, detail: String) {
        if ok {
            println!("[rank {}] ok   {name}: {detail}", self.rank);
        } else {
            println!("[rank {}] FAIL {name}: {detail}", self.rank);
            self.failures.push(name.to_string());
        }
    }
}

/// A model that fails on `fail_rank` at its `fail_at`-th data-gradient call: with an error, or
/// (`how == Nan`) with a NaN gradient and no error, or (`how == Panic`) with a panic.
struct FailsOnRank<M> {
    inner: M,
    fail: bool,
    calls: AtomicU64,
    fail_at: u64,
    how: How,
}

#[derive(Clone, Copy, PartialEq)]
enum How {
    Error,
    Nan,
    Panic,
}

impl<M: Model> Model for FailsOnRank<M> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn n_data(&self) -> usize {
        self.inner.n_data()
    }
    fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
        self.inner.grad_prior(t, o)
    }
    fn grad_data_sum(&self, t: &[f64], i: &[usize], o: &mut [f64]) -> Result<()> {
        if self.fail && self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.fail_at {
            match self.how {
                How::Error => return Err(Error::model_failure("grad_data_sum", "forced failure")),
                How::Nan => {
                    o.fill(f64::NAN);
                    return Ok(());
                }
                How::Panic => panic!("forced panic in the model at call {}", self.fail_at),
            }
        }
        self.inner.grad_data_sum(t, i, o)
    }
}

/// A model with no data (an empty shard).
struct Empty;

impl Model for Empty {
    fn dim(&self) -> usize {
        5
    }
    fn n_data(&self) -> usize {
        0
    }
    fn grad_prior(&self, _: &[f64], o: &mut [f64]) -> Result<()> {
        o.fill(0.0);
        Ok(())
    }
    fn grad_data_sum(&self, _: &[f64], _: &[usize], o: &mut [f64]) -> Result<()> {
        o.fill(0.0);
        Ok(())
    }
}

/// `--panic chains` / `--panic sharded`: the model panics on the last rank at its 200th
/// data-gradient call. In chains (`chains`) the panic is caught at the chain's boundary:
/// `scripts/test-mpi` checks that every rank returns the typed error naming the rank, chain and
/// iteration. In a sharded run (a collective in every step) it aborts the job: every rank's
/// process exits within 10 s, non-zero, and the output names the rank.
fn panic_scenario(cluster: &Cluster, what: &str) {
    let (me, size) = (cluster.rank(), cluster.size());
    let lg = LinearGaussian::synthetic(2_000, 3, 1.0, 10.0, 5).expect("model");
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50)).expect("sgld");
    let long = RunSettings { n_iter: 200_000_000, burn_in: 0, check_model: false, ..Default::default() };
    fn fails<M>(inner: M, fail: bool) -> FailsOnRank<M> {
        FailsOnRank { inner, fail, calls: AtomicU64::new(0), fail_at: 200, how: How::Panic }
    }
    let bad = me == size - 1;
    println!("[rank {me}] panic scenario '{what}' on {size} rank(s): rank {} panics", size - 1);
    let r = match what {
        "chains" => {
            // A panic in a chain is caught at the chain's boundary: a typed error on every
            // rank, naming the rank, the chain and the iteration (the run is short enough for
            // the other chains to finish: the ranks learn of the failure at the end).
            let inits: Vec<Vec<f64>> = (0..2 * size).map(|c| vec![0.1 * c as f64, -0.2, 0.3]).collect();
            let rs = RunSettings { n_chains: 2 * size, storage: Storage::Moments, n_iter: 20_000, ..long };
            let r = Runner::new(&fails(lg, bad), &sgld).starts(&inits).settings(rs).on(cluster).run().map(|_| ());
            match &r {
                Err(e) if bad && matches!(e.root(), Error::Panic { .. }) && names_rank(e, me) => {
                    println!("[rank {me}] contained panic, typed: {e}");
                }
                Err(Error::RankFailure { rank, chain: Some(c), iteration: Some(k), .. })
                    if !bad && *rank == size - 1 =>
                {
                    println!("[rank {me}] contained panic, typed: rank {rank} failed in chain {c} at iteration {k}");
                }
                _ => println!("[rank {me}] the panic scenario returned {r:?}: not the typed error expected"),
            }
            return;
        }
        "sharded" => {
            let n = 2_000;
            let full = LogisticRegression::synthetic(n, 5, 10.0, 9).expect("model");
            let sh = Sharded::new(cluster, fails(shard(&full, rows(n, me, size)), bad)).expect("sharded");
            run_sharded(&sh, &sgld, &[[0.0; 5]], &RunSettings { storage: Storage::Moments, ..long }, &[]).map(|_| ())
        }
        other => panic!("unknown panic scenario {other}"),
    };
    println!("[rank {me}] the panic scenario returned {r:?}: the job was not aborted");
}

fn names_rank(e: &Error, rank: usize) -> bool {
    matches!(e, Error::Rank { rank: r, .. } | Error::RankFailure { rank: r, .. } if *r == rank)
}

fn shard(full: &LogisticRegression, rows: std::ops::Range<usize>) -> LogisticRegression {
    let x = full.features().slice(s![rows.clone(), ..]).to_owned();
    let y = Array1::from(full.labels()[rows].to_vec());
    LogisticRegression::new(&x, &y, full.prior_var()).expect("shard model")
}

/// Rows of rank r of R over N items: contiguous, sizes as equal as possible.
fn rows(n: usize, r: usize, size: usize) -> std::ops::Range<usize> {
    (r * n / size)..((r + 1) * n / size)
}

fn main() {
    let cluster = Cluster::init().expect("MPI initialises");
    let (me, size) = (cluster.rank(), cluster.size());
    if let Some(what) = std::env::args().skip_while(|a| a != "--panic").nth(1) {
        panic_scenario(&cluster, &what);
        return;
    }
    let mut rep = Report { rank: me, failures: Vec::new() };
    println!("[rank {me}] {size} rank(s)");

    // 1. Chains over ranks.
    let lg = LinearGaussian::synthetic(2_000, 3, 1.0, 10.0, 5).expect("model");
    let settings = RunSettings { n_iter: 3_000, burn_in: 500, n_chains: 5, seed: 77, ..Default::default() };
    let inits: Vec<Vec<f64>> = (0..5).map(|c| vec![0.1 * c as f64, -0.2, 0.3]).collect();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(50)).expect("sgld");
    let sghmc = Sghmc::new(SghmcSettings::constant(1e-6, 0.1), Minibatch::new(50)).expect("sghmc");
    {
        let a = Runner::new(&lg, &sgld).starts(&inits).settings(settings).on(&cluster).run().expect("distributed run");
        let b = Runner::new(&lg, &sgld).starts(&inits).settings(settings).run().expect("serial run");
        let same = bits(&a.estimate) == bits(&b.estimate)
            && same_mean(&a.estimate, &b.estimate)
            && a.cost == b.cost
            && a.chains.len() == 5;
        rep.check("chains over ranks, SGLD", same, format!("{} draws compared bit for bit", bits(&a.estimate).len()));
        #[cfg(feature = "zarr")]
        {
            // The ranks write the trace together (chain c by rank c mod R), every rank reads it.
            let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mpi_trace_{size}.zarr"));
            let written = sgmcmc::distributed::write_zarr_mpi(&cluster, &path, &a.estimate);
            cluster.barrier();
            let same = written.is_ok()
                && sgmcmc::export::ZarrTrace::open(&path).is_ok_and(|t| {
                    (0..5).all(|c| {
                        t.read_chain(c).is_ok_and(|d| {
                            let want = b.estimate.samples(c).expect("samples").draws();
                            d.iter().zip(want.iter()).all(|(x, y)| x.to_bits() == y.to_bits())
                        })
                    })
                });
            rep.check(
                "a Zarr trace written by all ranks (one chunk per chain) reads back as the serial draws",
                same,
                format!("{written:?} at {}", path.display()),
            );
        }
        let a = Runner::new(&lg, &sghmc).starts(&inits).settings(settings).on(&cluster).run().expect("distributed run");
        let b = Runner::new(&lg, &sghmc).starts(&inits).settings(settings).run().expect("serial run");
        rep.check(
            "chains over ranks, SGHMC",
            bits(&a.estimate) == bits(&b.estimate) && a.cost == b.cost,
            String::new(),
        );
        // Replica ladders (a chain = a whole ladder: the unit placed on a rank) and contour
        // SGLD: the same draws, swap counts and learned PDFs on any number of ranks.
        let mut re = ReSgldSettings::new(1e-4, &[1.0, 3.0, 9.0]);
        re.anchor_every = 200;
        let resgld = ReSgld::new(re, Minibatch::new(50)).expect("resgld");
        let a =
            Runner::new(&lg, &resgld).starts(&inits).settings(settings).on(&cluster).run().expect("distributed run");
        let b = Runner::new(&lg, &resgld).starts(&inits).settings(settings).run().expect("serial run");
        let same_swaps =
            a.chains.iter().zip(&b.chains).all(|(x, y)| x.sampler.swap_counts() == y.sampler.swap_counts());
        rep.check(
            "chains over ranks, replica-exchange SGLD (ladders as units)",
            bits(&a.estimate) == bits(&b.estimate) && a.cost == b.cost && same_swaps,
            format!("swap counts of chain 0: {:?}", a.chains[0].sampler.swap_counts()),
        );
        let all: Vec<usize> = (0..lg.n_data()).collect();
        let u = lg.potential_prior(&inits[0]).expect("u0") + lg.potential_data_sum(&inits[0], &all).expect("u");
        let csgld = Csgld::new(CsgldSettings::new(1e-4, u - 50.0, 5.0, 40), Minibatch::new(50)).expect("csgld");
        let a = Runner::new(&lg, &csgld).starts(&inits).settings(settings).on(&cluster).run().expect("distributed run");
        let b = Runner::new(&lg, &csgld).starts(&inits).settings(settings).run().expect("serial run");
        rep.check(
            "chains over ranks, contour SGLD",
            bits(&a.estimate) == bits(&b.estimate)
                && a.chains.iter().zip(&b.chains).all(|(x, y)| x.sampler.energy_pdf() == y.sampler.energy_pdf()),
            String::new(),
        );
        // A constrained model (the Gaussian GLM with σ > 0 through its layout) and a tempered one
        // over ranks: the same draws as serial runs.
        let glm = Glm::synthetic(Family::Gaussian, 1_000, 2, 9).expect("glm").constrained().expect("layout");
        let glm_inits: Vec<Vec<f64>> = (0..5).map(|c| vec![0.1 * c as f64, -0.2, 0.3, 0.0]).collect();
        let sgld_glm = Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(50)).expect("sgld");
        let a = Runner::new(&glm, &sgld_glm)
            .starts(&glm_inits)
            .settings(settings)
            .on(&cluster)
            .run()
            .expect("distributed run");
        let b = Runner::new(&glm, &sgld_glm).starts(&glm_inits).settings(settings).run().expect("serial run");
        rep.check(
            "chains over ranks, a constrained model (GLM, sigma > 0)",
            bits(&a.estimate) == bits(&b.estimate) && a.cost == b.cost,
            String::new(),
        );
        let cold = Tempered::new(&lg, Temperature::posterior(0.5)).expect("tempered");
        let a =
            Runner::new(&cold, &sgld).starts(&inits).settings(settings).on(&cluster).run().expect("distributed run");
        let b = Runner::new(&cold, &sgld).starts(&inits).settings(settings).run().expect("serial run");
        rep.check(
            "chains over ranks, a tempered model (T = 0.5)",
            bits(&a.estimate) == bits(&b.estimate) && a.cost == b.cost,
            String::new(),
        );
        // Richardson–Romberg pairs over ranks.
        let rr = RichardsonRomberg::new(Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(50)).expect("sgld"));
        let a = Runner::new(&lg, &rr).start(&inits[1]).settings(settings).on(&cluster).run().expect("distributed RR");
        let b = Runner::new(&lg, &rr).start(&inits[1]).settings(settings).run().expect("serial RR");
        let same = bits(&a.coarse) == bits(&b.coarse)
            && bits(&a.fine) == bits(&b.fine)
            && same_mean(&a.estimate, &b.estimate)
            && a.cost == b.cost
            && a.iterations == b.iterations;
        rep.check(
            "Richardson-Romberg pairs over ranks (SGRRLD)",
            same,
            format!("{} coarse and {} fine values bit for bit", bits(&a.coarse).len(), bits(&a.fine).len()),
        );

        // Multilevel (ML-SGLD) samples over ranks: fixed levels and Giles' adaptive run.
        let start = [0.5, -0.5, 0.2];
        let mls = MlSgldSettings { keep_points: true, seed: 77, ..Default::default() };
        let ml = MlSgld::sgld(mls, 1.0 / 2_000.0, Minibatch::new(10), &start).expect("ml-sgld");
        let g = |t: &[f64]| t[0] + t[1] * t[2];
        let a = ml.run_fixed_mpi(&cluster, &lg, &g, &[23, 11, 7, 5]).expect("distributed ML-SGLD");
        let b = ml.run_fixed(&lg, &g, &[23, 11, 7, 5]).expect("serial ML-SGLD");
        // Debug prints every f64 in its shortest round-trip form: equal text is equal bits.
        let (ta, tb) = (format!("{a:?}"), format!("{b:?}"));
        rep.check(
            "ML-SGLD samples over ranks (fixed levels, kept end points)",
            ta == tb && a.measure.is_some(),
            format!("estimate {:e} vs {:e}, {} characters of result equal", a.estimate, b.estimate, ta.len()),
        );
        let target =
            AdaptiveSettings { target: RmseTarget::Absolute(0.02), n_initial: 13, max_level: 5, max_cost: None };
        let ml =
            MlSgld::sgld(MlSgldSettings { seed: 78, ..Default::default() }, 1.0 / 2_000.0, Minibatch::new(10), &start)
                .expect("ml-sgld");
        let a = ml.run_adaptive_mpi(&cluster, &lg, &g, &target);
        let b = ml.run_adaptive(&lg, &g, &target);
        let (ta, tb) = (format!("{a:?}"), format!("{b:?}"));
        rep.check(
            "ML-SGLD adaptive run over ranks",
            ta == tb,
            match &b {
                Ok(r) => format!(
                    "estimate {:e}, {} levels, {} samples, same on every rank",
                    r.estimate,
                    r.levels.len(),
                    r.levels.iter().map(|l| l.n_samples).sum::<usize>()
                ),
                Err(e) => format!("both: {e}"),
            },
        );
    }

    // 2. Sharded data.
    let n = 2_000;
    let full = LogisticRegression::synthetic(n, 5, 10.0, 9).expect("model");
    let sharded = Sharded::new(&cluster, shard(&full, rows(n, me, size))).expect("sharded model");
    let rs = RunSettings { n_iter: 2_000, burn_in: 0, n_chains: 1, seed: 3, ..Default::default() };
    let zero = [[0.0; 5]];
    let compare = |name: &str, a: &Estimate, b: &Estimate, rep: &mut Report| {
        let (da, db) =
            (a.samples(0).expect("draws").draws().to_owned(), b.samples(0).expect("draws").draws().to_owned());
        let scale = db.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let gap = da.iter().zip(db.iter()).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale;
        rep.check(
            name,
            gap <= 1e-12 && da.len() == db.len(),
            format!("max relative gap {gap:.2e} over {} iterations (max |θ| {scale:.3})", da.nrows()),
        );
    };
    {
        let sgld = Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(40)).expect("sgld");
        let a = run_sharded(&sharded, &sgld, &zero, &rs, &[]).expect("sharded run");
        let b = Runner::new(&full, &sgld).start(&zero[0]).settings(rs).run().expect("serial run");
        compare("sharded SGLD vs single process", &a.estimate, &b.estimate, &mut rep);
        // Every rank holds the same chain: compare with rank 0's by an exchange of the draws.
        let mine = bits(&a.estimate);
        let mut all = vec![0u64; mine.len() * size];
        {
            use sgmcmc::distributed::mpi::traits::*;
            sgmcmc::distributed::mpi::topology::SimpleCommunicator::world().all_gather_into(&mine[..], &mut all[..]);
        }
        rep.check(
            "sharded SGLD identical on every rank",
            all.chunks_exact(mine.len()).all(|c| c == &mine[..]),
            String::new(),
        );

        let map = full.map().expect("mode").to_vec();
        let cv_settings = CvSettings { batch_size: 40, ..Default::default() };
        let cv_sh = ControlVariate::at(&sharded, &map, cv_settings).expect("cv on shards");
        let cv_full = ControlVariate::at(&full, &map, cv_settings).expect("cv");
        let centre = [map.clone()];
        let a =
            run_sharded(&sharded, &Sgld::new(SgldSettings::constant(2e-4), cv_sh).expect("sgld-cv"), &centre, &rs, &[])
                .expect("sharded run");
        let b = Runner::new(&full, &Sgld::new(SgldSettings::constant(2e-4), cv_full).expect("sgld-cv"))
            .start(&map)
            .settings(rs)
            .run()
            .expect("serial run");
        compare("sharded SGLD-CV vs single process", &a.estimate, &b.estimate, &mut rep);
    }

    // 3. Failures on the last rank.
    let bad_rank = size - 1;
    {
        let model = FailsOnRank {
            inner: lg.clone(),
            fail: me == bad_rank,
            calls: AtomicU64::new(0),
            fail_at: 100,
            how: How::Error,
        };
        let rs = RunSettings { check_model: false, ..settings };
        let r = Runner::new(&model, &sgld).starts(&inits).settings(rs).on(&cluster).run();
        let detail = match &r {
            Err(e) => e.to_string(),
            Ok(_) => "no error".into(),
        };
        rep.check(
            "a failing rank (chains over ranks) is an error on every rank",
            r.as_ref().err().is_some_and(|e| names_rank(e, bad_rank)),
            detail,
        );
        let local = FailsOnRank {
            inner: shard(&full, rows(n, me, size)),
            fail: me == bad_rank,
            calls: AtomicU64::new(0),
            fail_at: 57,
            how: How::Error,
        };
        let sh = Sharded::new(&cluster, local).expect("sharded");
        let sgld = Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(40)).expect("sgld");
        let one =
            RunSettings { n_iter: 2_000, burn_in: 0, n_chains: 1, seed: 3, check_model: false, ..Default::default() };
        let r = run_sharded(&sh, &sgld, &zero, &one, &[]);
        let detail = match &r {
            Err(e) => e.to_string(),
            Ok(_) => "no error".into(),
        };
        let ok = r.as_ref().err().is_some_and(|e| {
            // The failing rank's own error keeps its chain's output (`Error::Kept`).
            let e = match e {
                Error::Kept { source, .. } => &**source,
                e => e,
            };
            (names_rank(e.root(), bad_rank)
                || names_rank(e, bad_rank)
                || matches!(e, Error::Chain { source, .. } if names_rank(source, bad_rank)))
                && e.to_string().contains("forced failure")
        });
        rep.check("a failing rank (sharded) is an error on every rank, with its own message", ok, detail);
        // A NaN in one rank's partial sum (no error raised): every rank's error names that rank.
        let local = FailsOnRank {
            inner: shard(&full, rows(n, me, size)),
            fail: me == bad_rank,
            calls: AtomicU64::new(0),
            fail_at: 499,
            how: How::Nan,
        };
        let sh = Sharded::new(&cluster, local).expect("sharded");
        let r = run_sharded(&sh, &sgld, &zero, &one, &[]);
        let detail = match &r {
            Err(e) => format!("{e} ({e:?})"),
            Ok(_) => "no error".into(),
        };
        // Since 2026-11-28 a divergence (NonFiniteGradient, with its iteration) wrapped in the
        // rank whose shard gave it, on every rank; it was a model failure.
        let ok = r.as_ref().err().is_some_and(|e| {
            names_rank(e, bad_rank)
                && e.is_divergence()
                && matches!(e.root(), Error::NonFiniteGradient { .. })
                && e.to_string().contains(&format!("rank {bad_rank}"))
                && e.iteration().is_some()
        });
        rep.check("a NaN in one rank's shard (sharded) is a divergence naming that rank on every rank", ok, detail);
        let model = FailsOnRank {
            inner: lg.clone(),
            fail: me == bad_rank,
            calls: AtomicU64::new(0),
            fail_at: 30,
            how: How::Error,
        };
        let ml = MlSgld::sgld(MlSgldSettings::default(), 1.0 / 2_000.0, Minibatch::new(10), &[0.0; 3]).expect("ml");
        let r = ml.run_fixed_mpi(&cluster, &model, &|t: &[f64]| t[0], &[8, 8, 8]);
        let detail = match &r {
            Err(e) => e.to_string(),
            Ok(_) => "no error".into(),
        };
        rep.check(
            "a failing rank (ML-SGLD samples) is an error on every rank",
            r.as_ref().err().is_some_and(|e| names_rank(e, bad_rank)),
            detail,
        );
    }

    // 4. Mismatched shards.
    {
        let r = if me == bad_rank && size > 1 {
            Sharded::new(&cluster, LogisticRegression::synthetic(100, 4, 10.0, 1).expect("model")).map(|_| ())
        } else {
            Sharded::new(&cluster, shard(&full, rows(n, me, size))).map(|_| ())
        };
        let want = size > 1;
        let ok = if want { r.as_ref().err().is_some_and(|e| names_rank(e, bad_rank)) } else { r.is_ok() };
        rep.check("a shard of another dimension is an error on every rank", ok, format!("{r:?}"));
        let r = if me == bad_rank {
            Sharded::new(&cluster, Empty).map(|_| ())
        } else {
            Sharded::new(&cluster, shard(&full, rows(n, me, size))).map(|_| ())
        };
        let ok = r.as_ref().err().is_some_and(|e| {
            names_rank(e, bad_rank) && matches!(e.root(), Error::EmptyData { .. } | Error::RankFailure { .. })
        });
        rep.check("an empty shard is an error on every rank", ok, format!("{r:?}"));
    }

    // 5. Distributed matrix factorisation vs its single-process simulation.
    {
        let ratings = Ratings::synthetic(40, 50, 3, 900, 0.5, 21).expect("ratings");
        let (train, test) = ratings.split(0.1, 22).expect("split");
        let part = BlockPartition::even(40, 50, size).expect("partition");
        let shards = RowShard::split(&part, &train).expect("shards");
        let tests = RowShard::split(&part, &test).expect("test shards");
        let model = MfModel {
            rank: 3,
            noise_var: 0.25,
            prior_var_w: 1.0,
            prior_var_h: 1.0,
            offset: train.mean(),
            init_scale: 0.1,
        };
        let run = MfRunSettings { n_iter: 600, burn_in: 300, eval_every: 25, seed: 17 };
        let fingerprint = |o: &MfOutput| {
            let mut v: Vec<u64> = o.w.iter().chain(o.h.iter()).map(|x| x.to_bits()).collect();
            v.extend(
                o.trace
                    .iter()
                    .flat_map(|p| [p.iteration, p.rmse_sample.to_bits(), p.rmse_mean.map_or(0, f64::to_bits)]),
            );
            v.extend(&o.diagonal_counts);
            v.push(o.skipped_pairs);
            v
        };
        for update in [
            MfUpdate::Sgld(SgldSettings::constant(2e-4)),
            MfUpdate::Psgld(PsgldSettings { step_size: StepSize::Constant(1e-3), decay: 0.9, damping: 1e-3 }),
            MfUpdate::Hamcmc(HamcmcSettings {
                memory: 2,
                trust_region: 50.0,
                initial_scale: 0.5,
                ..Default::default()
            }),
            MfUpdate::Hamcmc(HamcmcSettings {
                memory: 3,
                trust_region: 50.0,
                initial_scale: 0.5,
                ..Default::default()
            }),
        ] {
            let a = run_mf_mpi(&cluster, &shards[me], Some(&tests[me]), &model, &update, &run).expect("distributed MF");
            let b = run_mf(&shards, &tests, &model, &update, &run).expect("simulated MF");
            let same = fingerprint(&a) == fingerprint(&b);
            let name = match update {
                MfUpdate::Hamcmc(h) => format!("HAMCMC M={}", h.memory),
                u => u.name().to_string(),
            };
            rep.check(
                &format!("distributed MF ({name}, B = {size}) equals its single-process simulation bit for bit"),
                same && a.trace.len() == 24,
                format!(
                    "final test RMSE {:.6} vs {:.6}",
                    a.final_rmse().unwrap_or(f64::NAN),
                    b.final_rmse().unwrap_or(f64::NAN)
                ),
            );
        }
        // A rank whose ratings overflow its gradient (at the first iteration on that block).
        let bad = if me == bad_rank {
            let users: Vec<usize> = (0..train.len()).map(|k| train.get(k).expect("rating").0).collect();
            let items: Vec<usize> = (0..train.len()).map(|k| train.get(k).expect("rating").1).collect();
            let rows = part.row_range(me);
            let mut values: Vec<f64> = (0..train.len()).map(|k| train.get(k).expect("rating").2).collect();
            let k = users.iter().position(|u| rows.contains(u)).expect("a rating in the last block");
            values[k] = f64::MAX; // finite, but its residual times N/|Ω| overflows at once
            let r = Ratings::new(users, items, values, 40, 50).expect("ratings");
            RowShard::new(&part, me, &r).expect("shard")
        } else {
            shards[me].clone()
        };
        let update = MfUpdate::Sgld(SgldSettings::constant(2e-4));
        let r = run_mf_mpi(&cluster, &bad, Some(&tests[me]), &model, &update, &run);
        let detail = match &r {
            Err(e) => e.to_string(),
            Ok(_) => "no error".into(),
        };
        let ok = r.as_ref().err().is_some_and(|e| names_rank(e, bad_rank) && e.iteration().is_some());
        rep.check("a rank whose MF state overflows is an error on every rank, with the iteration", ok, detail);
        // A rank with another seed.
        let other = MfRunSettings { seed: if me == bad_rank && size > 1 { 18 } else { 17 }, ..run };
        let r = run_mf_mpi(&cluster, &shards[me], Some(&tests[me]), &model, &update, &other);
        let ok = if size > 1 { r.as_ref().err().is_some_and(|e| names_rank(e, bad_rank)) } else { r.is_ok() };
        rep.check("MF settings that differ on one rank are an error on every rank", ok, format!("{:?}", r.err()));
    }

    cluster.barrier();
    if rep.failures.is_empty() {
        println!("[rank {me}] all MPI checks passed");
    } else {
        println!("[rank {me}] {} MPI check(s) failed: {:?}", rep.failures.len(), rep.failures);
        drop(cluster);
        std::process::exit(1);
    }
}
