//! A counting global allocator shows that sampler steps allocate nothing after the first.
//!
//! The count is per thread (a const thread-local, which itself never allocates), so tests
//! running in parallel do not disturb each other.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use sgmcmc::*;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        LARGEST.with(|c| c.set(c.get().max(layout.size())));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        LARGEST.with(|c| c.set(c.get().max(new_size)));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(|c| c.get())
}

/// Allocations made by 1 000 steps after the first one.
fn steps_allocations<S: Sampler, M: Model>(mut s: S, model: &M) -> u64 {
    let mut rng = sgmcmc::rng::stream(1, &[0]);
    s.init(model, &vec![0.0; model.dim()], &mut rng).unwrap();
    s.step(model, &mut rng).unwrap();
    let before = allocations();
    for _ in 0..1_000 {
        s.step(model, &mut rng).unwrap();
    }
    allocations() - before
}

/// The largest single allocation (bytes) this thread makes while running `f`.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|c| c.set(0));
    let r = f();
    (r, LARGEST.with(|c| c.get()))
}

/// A model of any dimension that allocates nothing itself.
struct Wide(usize);

impl Model for Wide {
    fn dim(&self) -> usize {
        self.0
    }
    fn n_data(&self) -> usize {
        10
    }
    fn grad_prior(&self, t: &[f64], o: &mut [f64]) -> Result<()> {
        o.copy_from_slice(t);
        Ok(())
    }
    fn grad_data_sum(&self, _: &[f64], _: &[usize], o: &mut [f64]) -> Result<()> {
        o.fill(0.0);
        Ok(())
    }
}

/// The sizes the crate refuses (10⁹ chains, dimension 2⁴⁰, a synthetic set of 2⁴⁰ columns) are
/// refused without allocating them: no single allocation of the refusal reaches 64 KiB
/// (`tests/hardening.rs` checks the errors and that they come within a second).
#[test]
fn refused_sizes_allocate_nothing_of_their_size() {
    const SMALL: usize = 64 << 10;
    let m = LinearGaussian::synthetic(100, 2, 1.0, 10.0, 1).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(10)).unwrap();
    let st = RunSettings { n_chains: 1_000_000_000, storage: Storage::Moments, ..Default::default() };
    let (r, big) = largest_allocation(|| Runner::new(&m, &sgld).start(&[0.0, 0.0]).settings(st).run());
    assert!(matches!(r, Err(Error::OutOfMemory { .. })) && big < SMALL, "{big} bytes");
    let (r, big) = largest_allocation(|| Sample::new(&m, Sgld::auto()).chains(1_000_000_000).run());
    assert!(matches!(r, Err(Error::OutOfMemory { .. })) && big < SMALL, "{big} bytes");
    let (r, big) = largest_allocation(|| Sample::new(&Wide(1 << 40), Sgld::auto()).run());
    assert!(matches!(r, Err(Error::OutOfMemory { .. })) && big < SMALL, "{big} bytes");
    let (r, big) = largest_allocation(|| LogisticRegression::synthetic(10, 1 << 40, 1.0, 1));
    assert!(matches!(r, Err(Error::OutOfMemory { .. })) && big < SMALL, "{big} bytes");
}

#[test]
fn the_counter_counts() {
    let before = allocations();
    let v: Vec<u64> = Vec::with_capacity(10);
    std::hint::black_box(&v);
    assert!(allocations() > before, "the counting allocator is not active");
}

#[test]
fn sgld_and_sghmc_steps_do_not_allocate() {
    let logistic = LogisticRegression::synthetic(2_000, 10, 1.0, 1).unwrap();
    let linear = LinearGaussian::synthetic(2_000, 10, 1.0, 1.0, 1).unwrap();
    let sgld = |e| Sgld::new(SgldSettings { step_size: StepSize::Polynomial { gamma1: 1e-5, alpha: 0.5 } }, e).unwrap();
    let sghmc = |e| Sghmc::new(SghmcSettings { step_size: StepSize::Constant(1e-7), ..Default::default() }, e).unwrap();
    assert_eq!(steps_allocations(sgld(Minibatch::new(32)), &logistic), 0);
    assert_eq!(steps_allocations(sgld(Minibatch::without_replacement(32)), &logistic), 0);
    assert_eq!(steps_allocations(sgld(Minibatch::new(32)), &linear), 0);
    assert_eq!(
        steps_allocations(Sgld::lmc(SgldSettings { step_size: StepSize::Constant(1e-6) }).unwrap(), &logistic),
        0
    );
    assert_eq!(steps_allocations(sghmc(Minibatch::new(32)), &logistic), 0);
    assert_eq!(steps_allocations(sghmc(Minibatch::without_replacement(32)), &linear), 0);
    let mala = Mala::new(MalaSettings::fixed(1e-4)).unwrap();
    assert_eq!(steps_allocations(mala, &logistic), 0);
}

#[test]
fn other_sampler_steps_do_not_allocate() {
    let logistic = LogisticRegression::synthetic(2_000, 10, 1.0, 1).unwrap();
    let hamcmc = |m| {
        let s = HamcmcSettings { step_size: StepSize::Constant(1e-6), memory: m, ..Default::default() };
        Hamcmc::new(s, Minibatch::new(32)).unwrap()
    };
    assert_eq!(steps_allocations(hamcmc(2), &logistic), 0);
    assert_eq!(steps_allocations(hamcmc(5), &logistic), 0);
    let psgld =
        Psgld::new(PsgldSettings { step_size: StepSize::Constant(1e-5), ..Default::default() }, Minibatch::new(32));
    assert_eq!(steps_allocations(psgld.unwrap(), &logistic), 0);
    let g = ndarray::Array2::<f64>::eye(10) * 1e-3;
    let pre = PreconditionedSgld::new(SgldSettings::constant(1e-3), &g, Minibatch::new(32)).unwrap();
    assert_eq!(steps_allocations(pre, &logistic), 0);
    let map = logistic.map().unwrap();
    let cv =
        ControlVariate::at(&logistic, map.as_slice().unwrap(), CvSettings { batch_size: 32, ..Default::default() });
    let sgld_cv = Sgld::new(SgldSettings::constant(1e-5), cv.unwrap()).unwrap();
    assert_eq!(steps_allocations(sgld_cv, &logistic), 0);
    let sgnht = Sgnht::new(SgnhtSettings::constant(1e-3, 1.0), Minibatch::new(32)).unwrap();
    assert_eq!(steps_allocations(sgnht, &logistic), 0);
    let csgld = CyclicalSgld::new(CyclicalSettings::new(1e-5, 1_000, 4, 0.5), Minibatch::new(32)).unwrap();
    assert_eq!(steps_allocations(csgld, &logistic), 0);
    // The peers' methods: the splittings, reshuffled minibatches (a full shuffle at each
    // epoch's start, in the kept permutation), replica exchange (swaps on energy minibatches,
    // anchors refreshed every 10 steps here) and contour SGLD.
    let baoab = Baoab::new(KineticSettings::constant(1e-2, 1.0), Minibatch::reshuffled(32)).unwrap();
    assert_eq!(steps_allocations(baoab, &logistic), 0);
    let ubu = Ubu::new(KineticSettings::constant(1e-2, 1.0), Minibatch::new(32)).unwrap();
    assert_eq!(steps_allocations(ubu, &logistic), 0);
    let mut re = ReSgldSettings::new(1e-5, &[1.0, 3.0, 9.0]);
    re.anchor_every = 10;
    assert_eq!(steps_allocations(ReSgld::new(re, Minibatch::new(32)).unwrap(), &logistic), 0);
    let cs = Csgld::new(CsgldSettings::new(1e-5, 0.0, 10.0, 100), Minibatch::new(32)).unwrap();
    assert_eq!(steps_allocations(cs, &logistic), 0);
    // SVRG refreshes its snapshot (a full pass) every 10 steps here, in its own buffers.
    let svrg = Sgld::new(SgldSettings::constant(1e-5), Svrg::new(32).with_epoch(10)).unwrap();
    assert_eq!(steps_allocations(svrg, &logistic), 0);
    let saga = Sgld::new(SgldSettings::constant(1e-5), Saga::new(32)).unwrap();
    assert_eq!(steps_allocations(saga, &logistic), 0);
    // Whitened samplers (dense and diagonal T) and MALA with the dense metric.
    let d = logistic.dim();
    let cov = sgmcmc::ndarray::Array2::from_shape_fn((d, d), |(i, j)| if i == j { 1e-3 } else { 2e-4 });
    let dense = std::sync::Arc::new(Whitening::from_covariance(&vec![0.0; d], &cov).unwrap());
    let diag = std::sync::Arc::new(Whitening::diagonal(&vec![0.0; d], &vec![0.03; d]).unwrap());
    for w in [dense, diag] {
        let sgld = Sgld::new(SgldSettings::constant(1e-2), Minibatch::new(32)).unwrap().with_whitening(Some(w.clone()));
        assert_eq!(steps_allocations(sgld, &logistic), 0);
        let sghmc = Sghmc::new(SghmcSettings::constant(1e-3, 0.1), Minibatch::new(32)).unwrap().with_whitening(Some(w));
        assert_eq!(steps_allocations(sghmc, &logistic), 0);
    }
    // With a measured gradient-noise correction (the tuned default for SGLD and SGHMC).
    let noise_cov = sgmcmc::ndarray::Array2::from_shape_fn((d, d), |(i, j)| if i == j { 50.0 } else { 5.0 });
    let noise = std::sync::Arc::new(GradientNoise::from_covariance(&noise_cov).unwrap());
    let w = std::sync::Arc::new(Whitening::from_covariance(&vec![0.0; d], &cov).unwrap());
    let sgld = Sgld::new(SgldSettings::constant(1e-2), Minibatch::new(32))
        .unwrap()
        .with_whitening(Some(w.clone()))
        .with_gradient_noise(Some(noise.clone()));
    assert_eq!(steps_allocations(sgld, &logistic), 0);
    let sghmc = Sghmc::new(SghmcSettings::constant(1e-3, 0.1), Minibatch::new(32))
        .unwrap()
        .with_whitening(Some(w.clone()))
        .with_gradient_noise(Some(noise.clone()));
    assert_eq!(steps_allocations(sghmc, &logistic), 0);
    let sgnht = Sgnht::new(SgnhtSettings::constant(1e-3, 1.0), Minibatch::new(32))
        .unwrap()
        .with_whitening(Some(w.clone()))
        .with_gradient_noise(Some(noise.clone()));
    assert_eq!(steps_allocations(sgnht, &logistic), 0);
    // pSGLD's correction under its metric (a series with the current G).
    let psgld =
        Psgld::new(PsgldSettings { step_size: StepSize::Constant(1e-7), ..Default::default() }, Minibatch::new(32))
            .unwrap()
            .with_whitening(Some(w))
            .with_gradient_noise(Some(noise));
    assert_eq!(steps_allocations(psgld, &logistic), 0);
    let mala = Mala::new(MalaSettings { step_size: 1e-3, adapt_steps: 0, metric: Metric::Dense, ..Default::default() })
        .unwrap();
    assert_eq!(steps_allocations(mala, &logistic), 0);
}

/// Large data (above the 1 MiB at which rows are prefetched and stored on huge pages), in f64
/// and in f32: the prefetching gathers of the built-in models allocate nothing either.
#[test]
fn large_data_and_f32_steps_do_not_allocate() {
    let logistic = LogisticRegression::synthetic(150_000, 10, 1.0, 1).unwrap();
    let linear = LinearGaussian::synthetic(150_000, 10, 1.0, 1.0, 1).unwrap();
    let glm = Glm::synthetic(Family::Poisson, 150_000, 10, 1).unwrap();
    let nb = Glm::synthetic(Family::NegativeBinomial, 150_000, 10, 1).unwrap();
    let sgld = || Sgld::new(SgldSettings::constant(1e-8), Minibatch::new(100)).unwrap();
    assert_eq!(steps_allocations(sgld(), &logistic), 0);
    assert_eq!(steps_allocations(sgld(), &logistic.to_f32().unwrap()), 0);
    assert_eq!(steps_allocations(sgld(), &linear), 0);
    assert_eq!(steps_allocations(sgld(), &linear.to_f32().unwrap()), 0);
    assert_eq!(steps_allocations(sgld(), &glm), 0);
    assert_eq!(steps_allocations(sgld(), &glm.to_f32().unwrap()), 0);
    // With r on the log scale (θ = 0 is r = 1).
    assert_eq!(steps_allocations(sgld(), &nb.clone().constrained().unwrap()), 0);
    assert_eq!(steps_allocations(sgld(), &nb.to_f32().unwrap().constrained().unwrap()), 0);
}
