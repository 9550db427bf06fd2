//! Settings that cannot work are refused before anything runs, with a specific error: storage
//! that would not fit in memory, a thinning that keeps nothing, a non-finite starting point, a
//! multilevel path too long to count.

use sgmcmc::observe::Progress;
use sgmcmc::*;

fn lg() -> LinearGaussian {
    LinearGaussian::synthetic(100, 2, 1.0, 10.0, 1).unwrap()
}

fn sgld() -> Sgld {
    Sgld::new(SgldSettings::constant(1e-3), Minibatch::new(10)).unwrap()
}

/// 10¹³ iterations with every draw kept would need 4·10¹⁴ bytes: refused at once (no
/// allocation, no process abort), with the figures, for plain runs and Richardson–Romberg.
#[test]
fn storage_beyond_the_memory_limit_is_an_error() {
    let huge = RunSettings { n_iter: 10_000_000_000_000, burn_in: 0, ..Default::default() };
    let e = Runner::new(&lg(), &sgld()).start(&[0.0, 0.0]).settings(huge).run().unwrap_err();
    let Error::MemoryLimit { needed, limit } = e else { panic!("expected MemoryLimit, got {e:?}") };
    // 10¹³ draws × (2 coordinates + weight + cost + step size) × 8 bytes.
    assert_eq!(needed, 10_000_000_000_000 * 5 * 8);
    assert_eq!(limit, 8 << 30);
    assert!(e.to_string().contains("thin") && e.to_string().contains("Storage::Moments"));
    let rr = RichardsonRomberg::new(sgld());
    assert!(matches!(Runner::new(&lg(), &rr).start(&[0.0, 0.0]).settings(huge).run(), Err(Error::MemoryLimit { .. })));
    // The same run in streaming mode needs d² + 3d numbers per chain: accepted (and stopped at
    // once by an observer, so the test stays short).
    let moments = RunSettings { storage: Storage::Moments, ..huge };
    assert_eq!(moments.storage_bytes(2, 1), (4 + 6) * 8);
    let stop = sgmcmc::observe::StopWhen { condition: |p: &Progress<'_>| p.iteration >= 10, interval: 1 };
    let out = Runner::new(&lg(), &sgld()).start(&[0.0, 0.0]).settings(moments).observers(&[&stop]).run().unwrap();
    assert_eq!(out.chains[0].iterations, 10);
    // A limit of one's own, and none.
    let small = RunSettings { n_iter: 1_000, burn_in: 0, memory_limit: Some(1_000), ..Default::default() };
    assert!(matches!(
        Runner::new(&lg(), &sgld()).start(&[0.0, 0.0]).settings(small).run(),
        Err(Error::MemoryLimit { needed: 40_000, limit: 1_000 })
    ));
    let unlimited = RunSettings { memory_limit: None, ..small };
    assert!(Runner::new(&lg(), &sgld()).start(&[0.0, 0.0]).settings(unlimited).run().is_ok());
}

#[test]
fn a_thinning_that_keeps_nothing_is_refused_at_start() {
    let s = RunSettings { n_iter: 100, burn_in: 50, thin: 51, ..Default::default() };
    let e = Runner::new(&lg(), &sgld()).start(&[0.0, 0.0]).settings(s).run().unwrap_err();
    assert!(matches!(e, Error::InvalidParameter { name: "thin", .. }), "{e:?}");
    // thin = n_iter − burn_in keeps exactly one draw.
    let one = RunSettings { thin: 50, ..s };
    assert_eq!(Runner::new(&lg(), &sgld()).start(&[0.0, 0.0]).settings(one).run().unwrap().estimate.n_samples(), 1);
}

#[test]
fn a_non_finite_start_is_not_called_a_divergence() {
    for bad in [f64::NAN, f64::INFINITY] {
        let e = Runner::new(&lg(), &sgld()).start(&[bad, 0.0]).settings(RunSettings::default()).run().unwrap_err();
        assert_eq!(e.root(), &Error::NonFiniteStart { what: "theta0" });
        assert!(!e.to_string().contains("step size"), "{e}");
        let mala = Mala::new(MalaSettings::default()).unwrap();
        assert_eq!(
            Runner::new(&lg(), &mala).start(&[bad, 0.0]).settings(RunSettings::default()).run().unwrap_err().root(),
            &Error::NonFiniteStart { what: "theta0" }
        );
        assert!(matches!(
            MlSgld::sgld(MlSgldSettings::default(), 1e-3, Minibatch::new(10), &[bad, 0.0]),
            Err(Error::NonFiniteStart { .. })
        ));
    }
}

#[test]
fn multilevel_step_counts_never_wrap() {
    let ml = MlSgld::sgld(MlSgldSettings::default(), 1e-3, Minibatch::new(10), &[0.0, 0.0]).unwrap();
    assert_eq!(ml.steps(3).unwrap(), 5 * 4 * 8);
    for level in [61, 64, 70, usize::MAX] {
        assert!(matches!(ml.steps(level), Err(Error::InvalidParameter { name: "level", .. })), "level {level}");
    }
    assert!(matches!(ml.sample(&lg(), &|t: &[f64]| t[0], 70, 0), Err(Error::InvalidParameter { name: "level", .. })));
}
