//! The automatic-differentiation adapters (features `forward-ad` and `candle`): gradients equal
//! to hand-written ones, exact Hessian-vector products, engine failures as typed errors, and
//! SGLD chains that follow the hand-written model's chain.
//!
//! Run with `cargo test --release --features forward-ad,candle --test autodiff`.
#![cfg(any(feature = "forward-ad", feature = "candle"))]

use sgmcmc::*;

#[cfg(feature = "forward-ad")]
#[path = "common/three_ways.rs"]
mod three_ways_model;

/// The logistic test problem: N = 500, d = 6, prior variance 10.
fn logistic() -> LogisticRegression {
    LogisticRegression::synthetic(500, 6, 10.0, 41).unwrap()
}

fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().map(|x| x.abs()).fold(1e-300, f64::max);
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max) / scale
}

/// Points at which gradients are compared: the origin, the truth, and a far point.
fn points(d: usize) -> Vec<Vec<f64>> {
    vec![vec![0.0; d], (0..d).map(|j| 0.3 * (j as f64) - 0.7).collect(), (0..d).map(|j| 2.5 - j as f64).collect()]
}

/// Minibatches: the full data, a small one with repeated indices, a single item.
fn batches(n: usize) -> Vec<Vec<usize>> {
    vec![(0..n).collect(), vec![3, 17, 3, 400, 99, 17, 3], vec![n - 1]]
}

/// SGLD chains on `model` and on the hand-written logistic model, same seed: the largest
/// coordinate difference over the first 1 000 iterations.
fn sgld_chain_gap<M: Model>(model: &M) -> f64 {
    let hand = logistic();
    let settings = RunSettings { n_iter: 1_000, burn_in: 0, seed: 5, ..Default::default() };
    let sgld = Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(50)).unwrap();
    let a = Runner::new(&hand, &sgld).start(&[0.0; 6]).settings(settings).run().unwrap();
    let b = Runner::new(model, &sgld).start(&[0.0; 6]).settings(settings).run().unwrap();
    let (da, db) = (a.estimate.samples(0).unwrap(), b.estimate.samples(0).unwrap());
    assert_eq!(da.len(), 1_000);
    assert_eq!(db.len(), 1_000);
    // The chain moves: the test has power (a wrong gradient would separate the chains).
    let spread = da.draws().iter().map(|x| x.abs()).fold(0.0, f64::max);
    assert!(spread > 0.5, "chain did not move: {spread}");
    da.draws().iter().zip(db.draws().iter()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

/// The largest relative gap between `model`'s gradients (data sums over the test batches, and
/// prior) and the hand-written logistic model's, over the test points; asserts the potentials
/// agree to 1e-9 on the way.
fn logistic_gradient_gap<M: Model>(model: &M) -> f64 {
    let hand = logistic();
    let mut worst = 0.0f64;
    for t in points(6) {
        for idx in batches(500) {
            let (mut a, mut b) = (vec![0.0; 6], vec![0.0; 6]);
            hand.grad_data_sum(&t, &idx, &mut a).unwrap();
            model.grad_data_sum(&t, &idx, &mut b).unwrap();
            worst = worst.max(rel_err(&b, &a));
            let (ua, ub) = (hand.potential_data_sum(&t, &idx).unwrap(), model.potential_data_sum(&t, &idx).unwrap());
            assert!((ua - ub).abs() < 1e-9, "potentials {ua} vs {ub}");
        }
        let (mut a, mut b) = (vec![0.0; 6], vec![0.0; 6]);
        hand.grad_prior(&t, &mut a).unwrap();
        model.grad_prior(&t, &mut b).unwrap();
        worst = worst.max(rel_err(&b, &a));
    }
    worst
}

/// A one-hidden-layer tanh MLP for binary labels, `f(x) = w₂ᵀ tanh(W₁x + b₁) + b₂`, Bernoulli
/// likelihood; hand-written backpropagation, checked against finite differences below.
mod mlp {
    pub const IN: usize = 3;
    pub const HID: usize = 5;
    /// W₁ (HID × IN, row-major), b₁ (HID), w₂ (HID), b₂ (1).
    pub const DIM: usize = HID * IN + HID + HID + 1;

    pub struct Data {
        pub x: Vec<[f64; IN]>,
        pub y: Vec<f64>,
    }

    pub fn data() -> Data {
        // A fixed, deterministic data set (no RNG needed): 40 points on a spiral.
        let x: Vec<[f64; IN]> = (0..40)
            .map(|i| {
                let t = i as f64 * 0.37;
                [t.cos() * (1.0 + 0.05 * i as f64), t.sin(), 0.1 * (i % 7) as f64 - 0.3]
            })
            .collect();
        let y = (0..40).map(|i| f64::from(u8::from((i * 7) % 3 == 0))).collect();
        Data { x, y }
    }

    pub fn theta() -> Vec<f64> {
        (0..DIM).map(|j| 0.4 * ((j as f64) * 1.3).sin()).collect()
    }

    /// Σ_{i∈idx} [softplus(f(xᵢ)) − yᵢ f(xᵢ)].
    pub fn potential(d: &Data, t: &[f64], idx: &[usize]) -> f64 {
        let mut u = 0.0;
        for &i in idx {
            let mut f = t[DIM - 1];
            for h in 0..HID {
                let mut a = t[HID * IN + h];
                for k in 0..IN {
                    a += t[h * IN + k] * d.x[i][k];
                }
                f += t[HID * IN + HID + h] * a.tanh();
            }
            let sp = if f > 0.0 { f + (-f).exp().ln_1p() } else { f.exp().ln_1p() };
            u += sp - d.y[i] * f;
        }
        u
    }

    /// The gradient of [`potential`] by hand.
    pub fn gradient(d: &Data, t: &[f64], idx: &[usize], out: &mut [f64]) {
        out.fill(0.0);
        let mut act = [0.0; HID];
        for &i in idx {
            let mut f = t[DIM - 1];
            for h in 0..HID {
                let mut a = t[HID * IN + h];
                for k in 0..IN {
                    a += t[h * IN + k] * d.x[i][k];
                }
                act[h] = a.tanh();
                f += t[HID * IN + HID + h] * act[h];
            }
            let r = 1.0 / (1.0 + (-f).exp()) - d.y[i];
            out[DIM - 1] += r;
            for h in 0..HID {
                let w2 = t[HID * IN + HID + h];
                out[HID * IN + HID + h] += r * act[h];
                let da = r * w2 * (1.0 - act[h] * act[h]);
                out[HID * IN + h] += da;
                for k in 0..IN {
                    out[h * IN + k] += da * d.x[i][k];
                }
            }
        }
    }

    /// Central differences extrapolated (Richardson, three levels: error O(h⁶)).
    pub fn fd_gradient(d: &Data, t: &[f64], idx: &[usize]) -> Vec<f64> {
        let cd = |j: usize, h: f64| {
            let (mut p, mut m) = (t.to_vec(), t.to_vec());
            p[j] += h;
            m[j] -= h;
            (potential(d, &p, idx) - potential(d, &m, idx)) / (2.0 * h)
        };
        (0..DIM)
            .map(|j| {
                let h = 0.02;
                let (a, b, c) = (cd(j, h), cd(j, h / 2.0), cd(j, h / 4.0));
                let (ab, bc) = ((4.0 * b - a) / 3.0, (4.0 * c - b) / 3.0);
                (16.0 * bc - ab) / 15.0
            })
            .collect()
    }
}

/// The hand-written MLP gradient agrees with extrapolated finite differences (the reference for
/// the adapters' MLP gradients below).
#[test]
fn hand_written_mlp_gradient_matches_finite_differences() {
    let d = mlp::data();
    let t = mlp::theta();
    let idx: Vec<usize> = (0..40).collect();
    let mut g = vec![0.0; mlp::DIM];
    mlp::gradient(&d, &t, &idx, &mut g);
    let fd = mlp::fd_gradient(&d, &t, &idx);
    let err = rel_err(&g, &fd);
    eprintln!("MLP: hand-written vs extrapolated finite differences, max rel. error {err:.2e}");
    assert!(err < 1e-10, "hand-written MLP gradient off by {err:e}");
}

#[cfg(feature = "forward-ad")]
mod forward {
    use super::*;
    use sgmcmc::ad::num_dual::DualNum;
    use sgmcmc::ad::{DualDensity, ForwardAd};

    /// `Uᵢ(θ) = Σⱼ cᵢⱼ θⱼ² θ_{(j+1) mod d} + sin θⱼ`, prior `Σⱼ j θⱼ²`: couples every coordinate
    /// with the next, so a chunk boundary that dropped or shifted a coordinate would show.
    struct Coupled {
        d: usize,
    }

    impl Coupled {
        fn c(i: usize, j: usize) -> f64 {
            1.0 + ((i * 7 + j * 3) % 5) as f64 / 4.0
        }
        fn grad(&self, t: &[f64], idx: &[usize]) -> Vec<f64> {
            let d = self.d;
            let mut g = vec![0.0; d];
            for &i in idx {
                for j in 0..d {
                    let k = (j + 1) % d;
                    let c = Self::c(i, j);
                    g[j] += 2.0 * c * t[j] * t[k] + t[j].cos();
                    g[k] += c * t[j] * t[j];
                }
            }
            g
        }
    }

    impl DualDensity for Coupled {
        fn dim(&self) -> usize {
            self.d
        }
        fn n_data(&self) -> usize {
            5
        }
        fn datum<D: DualNum<Primitive = f64> + Copy>(&self, t: &[D], i: usize) -> D {
            let d = self.d;
            (0..d).fold(D::from(0.0), |s, j| s + t[j] * t[j] * t[(j + 1) % d] * Self::c(i, j) + t[j].sin())
        }
        fn prior<D: DualNum<Primitive = f64> + Copy>(&self, t: &[D]) -> D {
            t.iter().enumerate().fold(D::from(0.0), |s, (j, v)| s + *v * *v * j as f64)
        }
    }

    /// Vector duals in balanced chunks: the gradient is right in every dimension around the
    /// chunk widths (1 to 23, and 57, 101: several passes, uneven chunks), prior included.
    #[test]
    fn chunked_gradients_are_exact_in_every_dimension() {
        for d in (1..=23).chain([57, 101]) {
            let m = ForwardAd::new(Coupled { d }).unwrap();
            let t: Vec<f64> = (0..d).map(|j| 0.3 + 0.1 * ((j * 5) % 7) as f64 - 0.2 * (j % 2) as f64).collect();
            let idx = [0, 3, 3, 1, 4];
            let mut g = vec![f64::NAN; d];
            m.grad_data_sum(&t, &idx, &mut g).unwrap();
            let want = m.density().grad(&t, &idx);
            let err = rel_err(&g, &want);
            assert!(err < 1e-14, "d = {d}: data gradient relative error {err:e}");
            m.grad_prior(&t, &mut g).unwrap();
            let want: Vec<f64> = t.iter().enumerate().map(|(j, v)| 2.0 * j as f64 * v).collect();
            assert!(rel_err(&g, &want) < 1e-15, "d = {d}: prior gradient");
            // An empty minibatch has a zero gradient.
            m.grad_data_sum(&t, &[], &mut g).unwrap();
            assert!(g.iter().all(|&x| x == 0.0), "d = {d}: empty minibatch");
        }
    }

    /// A linear regression with an intercept and unknown σ > 0, written three ways on its
    /// natural scale — by hand, as a forward-AD density, and as the GLM family — each under
    /// the same layout (`b0`, `beta`, `sigma` positive): the same SGLD chain to rounding.
    mod three_ways {
        use super::*;
        use ndarray::Array2;

        use crate::three_ways_model::{Dual, Hand, P, data, glm, layout};

        fn chain<M: Model>(model: &M) -> Array2<f64> {
            let settings = RunSettings { n_iter: 1_000, burn_in: 0, seed: 8, ..Default::default() };
            let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(30)).unwrap();
            Runner::new(model, &sgld)
                .start(&[0.0; P + 2])
                .settings(settings)
                .run()
                .unwrap()
                .estimate
                .samples(0)
                .unwrap()
                .draws()
                .to_owned()
        }

        #[test]
        fn the_same_model_three_ways_gives_the_same_chain() {
            let hand = Constrained::new(Hand(data(300)), layout()).unwrap();
            let dual = Constrained::new(ForwardAd::new(Dual(data(300))).unwrap(), layout()).unwrap();
            let glm = glm(&data(300)).unwrap();
            assert_eq!(glm.layout(), &layout());
            let (a, b, c) = (chain(&hand), chain(&dual), chain(&glm));
            let gap =
                |p: &Array2<f64>, q: &Array2<f64>| p.iter().zip(q).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            let moved = a.iter().map(|x| x.abs()).fold(0.0, f64::max);
            eprintln!(
                "chains: hand vs forward-AD {:e}, hand vs GLM {:e} (largest |φ| {moved:.2})",
                gap(&a, &b),
                gap(&a, &c)
            );
            assert!(moved > 0.5, "the chain did not move");
            assert!(gap(&a, &b) < 1e-10 && gap(&a, &c) < 1e-10);
        }
    }

    /// The logistic model written once, generically.
    pub struct Logistic {
        x: Vec<Vec<f64>>,
        y: Vec<f64>,
        prior_var: f64,
    }

    pub fn logistic_ad() -> ForwardAd<Logistic> {
        let m = logistic();
        let x = m.features().outer_iter().map(|r| r.to_vec()).collect();
        ForwardAd::new(Logistic { x, y: m.labels().to_vec(), prior_var: m.prior_var() }).unwrap()
    }

    impl DualDensity for Logistic {
        fn dim(&self) -> usize {
            self.x[0].len()
        }
        fn n_data(&self) -> usize {
            self.y.len()
        }
        fn datum<D: DualNum<Primitive = f64> + Copy>(&self, theta: &[D], i: usize) -> D {
            let mut z = D::from(0.0);
            for (t, x) in theta.iter().zip(&self.x[i]) {
                z += *t * *x;
            }
            let softplus = if z.re() > 0.0 { z + (-z).exp().ln_1p() } else { z.exp().ln_1p() };
            softplus - z * self.y[i]
        }
        fn prior<D: DualNum<Primitive = f64> + Copy>(&self, theta: &[D]) -> D {
            theta.iter().fold(D::from(0.0), |acc, t| acc + *t * *t) / (2.0 * self.prior_var)
        }
    }

    struct Mlp(mlp::Data);

    impl DualDensity for Mlp {
        fn dim(&self) -> usize {
            mlp::DIM
        }
        fn n_data(&self) -> usize {
            self.0.y.len()
        }
        fn datum<D: DualNum<Primitive = f64> + Copy>(&self, t: &[D], i: usize) -> D {
            use mlp::{DIM, HID, IN};
            let mut f = t[DIM - 1];
            for h in 0..HID {
                let mut a = t[HID * IN + h];
                for k in 0..IN {
                    a += t[h * IN + k] * self.0.x[i][k];
                }
                f += t[HID * IN + HID + h] * a.tanh();
            }
            let sp = if f.re() > 0.0 { f + (-f).exp().ln_1p() } else { f.exp().ln_1p() };
            sp - f * self.0.y[i]
        }
        fn prior<D: DualNum<Primitive = f64> + Copy>(&self, _t: &[D]) -> D {
            D::from(0.0)
        }
    }

    #[test]
    fn forward_ad_gradients_equal_hand_written_logistic() {
        let worst = logistic_gradient_gap(&logistic_ad());
        eprintln!("forward-ad logistic gradient: max rel. error {worst:.2e}");
        assert!(worst < 1e-10);
    }

    #[test]
    fn forward_ad_hvp_equals_the_analytic_one() {
        let (hand, ad) = (logistic(), logistic_ad());
        let mut worst = 0.0f64;
        for t in points(6) {
            let v: Vec<f64> = (0..6).map(|j| 1.0 - 0.4 * j as f64).collect();
            for idx in batches(500) {
                let (mut a, mut b) = (vec![0.0; 6], vec![0.0; 6]);
                hand.hvp_data_sum(&t, &v, &idx, &mut a).unwrap();
                ad.hvp_data_sum(&t, &v, &idx, &mut b).unwrap();
                worst = worst.max(rel_err(&b, &a));
            }
            let (mut a, mut b) = (vec![0.0; 6], vec![0.0; 6]);
            hand.hvp_prior(&t, &v, &mut a).unwrap();
            ad.hvp_prior(&t, &v, &mut b).unwrap();
            worst = worst.max(rel_err(&b, &a));
        }
        eprintln!("forward-ad logistic HVP: max rel. error {worst:.2e}");
        assert!(worst < 1e-10);
        // The Taylor estimator and the curvature tuning accept the adapter.
        assert!(Taylor::at(&ad, &[0.1; 6], CvSettings { batch_size: 10, ..Default::default() }).is_ok());
        let c = sgmcmc::tune::curvature(&ad, &[0.0; 6], &Default::default()).unwrap();
        let c_hand = sgmcmc::tune::curvature(&hand, &[0.0; 6], &Default::default()).unwrap();
        assert!((c.lambda_max - c_hand.lambda_max).abs() < 1e-8 * c_hand.lambda_max);
    }

    #[test]
    fn forward_ad_mlp_gradient_equals_hand_written() {
        let d = mlp::data();
        let t = mlp::theta();
        let ad = ForwardAd::new(Mlp(mlp::data())).unwrap();
        let mut worst = 0.0f64;
        for idx in [(0..40).collect::<Vec<_>>(), vec![1, 1, 5, 39]] {
            let (mut a, mut b) = (vec![0.0; mlp::DIM], vec![0.0; mlp::DIM]);
            mlp::gradient(&d, &t, &idx, &mut a);
            ad.grad_data_sum(&t, &idx, &mut b).unwrap();
            worst = worst.max(rel_err(&b, &a));
        }
        eprintln!("forward-ad MLP gradient: max rel. error {worst:.2e}");
        assert!(worst < 1e-10);
    }

    #[test]
    fn sgld_through_forward_ad_follows_the_hand_written_chain() {
        let gap = sgld_chain_gap(&logistic_ad());
        eprintln!("forward-ad SGLD chain: max |Δθ| over 1 000 iterations {gap:.2e}");
        assert!(gap < 1e-9);
    }
}

#[cfg(feature = "candle")]
mod candle {
    use super::*;
    use sgmcmc::ad::candle_core::{D, DType, Device, Tensor};
    use sgmcmc::ad::{CandleModel, Prior};

    /// Σ softplus(z) − y z with z = Xθ, in candle ops.
    fn logistic_nll(p: &[Tensor], b: &[Tensor]) -> sgmcmc::ad::candle_core::Result<Tensor> {
        let z = b[0].matmul(&p[0].unsqueeze(1)?)?.squeeze(1)?;
        let softplus = (z.relu()? + (z.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
        (softplus - (z * &b[1])?)?.sum_all()
    }

    pub fn logistic_candle() -> CandleModel {
        let m = logistic();
        let x = Tensor::from_slice(m.features().as_slice().unwrap(), (500, 6), &Device::Cpu).unwrap();
        let y = Tensor::from_slice(m.labels(), 500, &Device::Cpu).unwrap();
        CandleModel::new(&[vec![6]], vec![x, y], Prior::Gaussian { sd: m.prior_var().sqrt() }, logistic_nll).unwrap()
    }

    fn mlp_candle() -> CandleModel {
        use mlp::{HID, IN};
        let d = mlp::data();
        let flat: Vec<f64> = d.x.iter().flatten().copied().collect();
        let x = Tensor::from_slice(&flat, (40, IN), &Device::Cpu).unwrap();
        let y = Tensor::from_slice(&d.y, 40, &Device::Cpu).unwrap();
        let shapes = [vec![HID, IN], vec![HID], vec![HID], vec![1]];
        CandleModel::new(&shapes, vec![x, y], Prior::Flat, |p, b| {
            let a = b[0].matmul(&p[0].t()?)?.broadcast_add(&p[1])?.tanh()?;
            let f = a.matmul(&p[2].unsqueeze(1)?)?.squeeze(1)?.broadcast_add(&p[3])?;
            let softplus = (f.relu()? + (f.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
            (softplus - (f * &b[1])?)?.sum_all()
        })
        .unwrap()
    }

    #[test]
    fn candle_gradients_equal_hand_written_logistic() {
        let worst = logistic_gradient_gap(&logistic_candle());
        eprintln!("candle logistic gradient: max rel. error {worst:.2e}");
        assert!(worst < 1e-10);
    }

    #[test]
    fn candle_mlp_gradient_equals_hand_written() {
        let d = mlp::data();
        let t = mlp::theta();
        let c = mlp_candle();
        let mut worst = 0.0f64;
        for idx in [(0..40).collect::<Vec<_>>(), vec![1, 1, 5, 39]] {
            let (mut a, mut b) = (vec![0.0; mlp::DIM], vec![0.0; mlp::DIM]);
            mlp::gradient(&d, &t, &idx, &mut a);
            c.grad_data_sum(&t, &idx, &mut b).unwrap();
            worst = worst.max(rel_err(&b, &a));
        }
        eprintln!("candle MLP gradient: max rel. error {worst:.2e}");
        assert!(worst < 1e-10);
        // In f32 the gradient is the f32 one: close, not equal.
        let c32 = mlp_candle().with_dtype(DType::F32).unwrap();
        let idx: Vec<usize> = (0..40).collect();
        let (mut a, mut b) = (vec![0.0; mlp::DIM], vec![0.0; mlp::DIM]);
        mlp::gradient(&d, &t, &idx, &mut a);
        c32.grad_data_sum(&t, &idx, &mut b).unwrap();
        let e32 = rel_err(&b, &a);
        assert!(e32 > 0.0 && e32 < 1e-5, "f32 gradient error {e32:e}");
    }

    #[test]
    fn sgld_through_candle_follows_the_hand_written_chain() {
        let gap = sgld_chain_gap(&logistic_candle());
        eprintln!("candle SGLD chain: max |Δθ| over 1 000 iterations {gap:.2e}");
        assert!(gap < 1e-9);
    }

    /// A closure that fails (a shape mismatch inside candle) comes back as the typed error from
    /// a run, with the iteration and chain; no panic.
    #[test]
    fn a_candle_failure_is_a_typed_error() {
        let m = logistic();
        let x = Tensor::from_slice(m.features().as_slice().unwrap(), (500, 6), &Device::Cpu).unwrap();
        let y = Tensor::from_slice(m.labels(), 500, &Device::Cpu).unwrap();
        // Wrong: multiplies (n × 6) by a (5,) block.
        let bad = CandleModel::new(&[vec![5], vec![1]], vec![x.clone(), y.clone()], Prior::Flat, |p, b| {
            b[0].matmul(&p[0].unsqueeze(1)?)?.sum_all()
        })
        .unwrap();
        let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(10)).unwrap();
        let settings = RunSettings { n_iter: 10, burn_in: 0, n_chains: 2, check_model: false, ..Default::default() };
        let err = Runner::new(&bad, &sgld).start(&[0.0; 6]).settings(settings).run().unwrap_err();
        eprintln!("{err}");
        match err.root() {
            Error::ModelFailure { method: "grad_data_sum", iteration: Some(0), message } => {
                assert!(message.contains("matmul") || message.contains("shape"), "{message}")
            }
            other => panic!("expected ModelFailure, got {other:?}"),
        }
        assert!(matches!(err, Error::Chain { .. }));
        // A closure returning a vector, not a scalar.
        let vec_loss = CandleModel::new(&[vec![6]], vec![x, y], Prior::Flat, |p, b| {
            b[0].matmul(&p[0].unsqueeze(1)?)?.squeeze(D::Minus1)
        })
        .unwrap();
        let mut g = [0.0; 6];
        let e = vec_loss.grad_data_sum(&[0.0; 6], &[0, 1], &mut g).unwrap_err();
        assert!(
            matches!(&e, Error::ModelFailure { iteration: None, message, .. } if message.contains("not a scalar")),
            "{e}"
        );
        // Construction errors.
        let t = Tensor::zeros((3, 2), DType::F64, &Device::Cpu).unwrap();
        let u = Tensor::zeros((4,), DType::F64, &Device::Cpu).unwrap();
        let nll = |_: &[Tensor], b: &[Tensor]| b[0].sum_all();
        assert!(matches!(
            CandleModel::new(&[vec![2]], vec![t.clone(), u], Prior::Flat, nll),
            Err(Error::DimensionMismatch { .. })
        ));
        assert!(matches!(CandleModel::new(&[], vec![t.clone()], Prior::Flat, nll), Err(Error::EmptyData { .. })));
        assert!(matches!(
            CandleModel::new(&[vec![2]], vec![t], Prior::Gaussian { sd: -1.0 }, nll),
            Err(Error::InvalidParameter { .. })
        ));
    }
}
