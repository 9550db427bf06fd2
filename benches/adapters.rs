//! Gradient cost per minibatch through the automatic-differentiation adapters against the
//! hand-written models, measured side by side in one run.
//!
//! - Logistic regression, setting S1 of the `samplers` bench (N = 10⁵, d = 10, n = 100): the
//!   built-in hand-written model, the forward-mode adapter (`ForwardAd`, num-dual dual numbers)
//!   and the candle adapter (`CandleModel`, f64, reverse mode).
//! - A one-hidden-layer MLP 20-50-1 with tanh and a Bernoulli likelihood (1 101 parameters,
//!   N = 10⁴, n = 100): hand-written backpropagation (below), the candle adapter, and the
//!   forward-mode adapter (69 passes of 16-wide vector duals; timed on 10 samples).
//! - "forward-ad-per-coordinate": the forward-mode adapter as it was before vector duals (one
//!   scalar-dual pass per coordinate, re-implemented below on the same density), and
//!   "forward-ad-num-dual": as it was before the crate's own vector dual (num-dual's
//!   `DualSVec64<10>` chunks), so that each change is measured before/after in one run.
//! - Logistic regression at d = 30, 100 and 300 (N = 10⁴): hand-written, forward-ad, candle — the
//!   crossover between forward and reverse mode.
//!
//! Each benchmark times one `grad_data_sum` on a fixed minibatch at a fixed θ.
//! Run with `cargo bench --features forward-ad,candle --bench adapters` (for candle's
//! single-thread figures: `RAYON_NUM_THREADS=1`).

#[path = "../examples/support/mod.rs"]
mod support;
use criterion::{Criterion, criterion_group, criterion_main};
use sgmcmc::ad::candle_core::{Device, Tensor};
use sgmcmc::ad::num_dual::{Dual64, DualNum, DualSVec64};
use sgmcmc::ad::{CandleModel, DualDensity, ForwardAd, Prior};
use sgmcmc::rng::stream;
use sgmcmc::{LogisticRegression, Model};
use std::hint::black_box;
use std::time::Duration;
use support::normals;

const BATCH: usize = 100;

struct LogisticDensity {
    x: Vec<Vec<f64>>,
    y: Vec<f64>,
    prior_var: f64,
}

impl DualDensity for LogisticDensity {
    fn dim(&self) -> usize {
        self.x[0].len()
    }
    fn n_data(&self) -> usize {
        self.y.len()
    }
    #[inline(always)]
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

/// The forward-mode adapter before vector duals: one scalar-dual pass per coordinate.
struct PerCoordinate<T>(T);

impl<T: DualDensity> Model for PerCoordinate<T> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn n_data(&self) -> usize {
        self.0.n_data()
    }
    fn grad_prior(&self, _: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
        out.fill(0.0);
        Ok(())
    }
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
        let mut buf: Vec<Dual64> = theta.iter().map(|&t| Dual64::new(t, 0.0)).collect();
        for (j, o) in out.iter_mut().enumerate() {
            buf[j].eps = 1.0;
            *o = idx.iter().fold(0.0, |s, &i| s + self.0.datum(&buf, i).eps);
            buf[j].eps = 0.0;
        }
        Ok(())
    }
}

/// The forward-mode adapter of the previous release: num-dual's `DualSVec64<10>` in chunks of
/// 10 coordinates (one pass at d = 10; its balanced chunks are also 10 wide for the MLP's 1 101
/// coordinates but one), so that the change to the crate's plain-array dual is measured
/// before/after in one run.
struct NumDualVector<T>(T);

impl<T: DualDensity> Model for NumDualVector<T> {
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn n_data(&self) -> usize {
        self.0.n_data()
    }
    fn grad_prior(&self, _: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
        out.fill(0.0);
        Ok(())
    }
    fn grad_data_sum(&self, theta: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
        thread_local! {
            static BUF: std::cell::RefCell<Vec<DualSVec64<10>>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUF.with_borrow_mut(|buf| self.chunks(buf, theta, idx, out));
        Ok(())
    }
}

impl<T: DualDensity> NumDualVector<T> {
    /// The passes, on a reused buffer (as the adapter did).
    fn chunks(&self, buf: &mut Vec<DualSVec64<10>>, theta: &[f64], idx: &[usize], out: &mut [f64]) {
        buf.clear();
        buf.extend(theta.iter().map(|&t| DualSVec64::from_re(t)));
        for start in (0..theta.len()).step_by(10) {
            let end = (start + 10).min(theta.len());
            for (k, j) in (start..end).enumerate() {
                buf[j] = DualSVec64::from_re(theta[j]).derivative(k);
            }
            let mut it = idx.iter();
            let first = self.0.datum(buf, *it.next().expect("a minibatch"));
            let r = it.fold(first, |s, &i| s + self.0.datum(buf, i));
            match r.eps.0 {
                Some(g) => out[start..end].copy_from_slice(&g.as_slice()[..end - start]),
                None => out[start..end].fill(0.0),
            }
            for j in start..end {
                buf[j] = DualSVec64::from_re(theta[j]);
            }
        }
    }
}

fn softplus_nll(z: &Tensor, y: &Tensor) -> sgmcmc::ad::candle_core::Result<Tensor> {
    let softplus = (z.relu()? + (z.abs()?.neg()?.exp()? + 1.0)?.log()?)?;
    (softplus - (z * y)?)?.sum_all()
}

const IN: usize = 20;
const HID: usize = 50;
const MLP_DIM: usize = HID * IN + HID + HID + 1;

/// The MLP's per-datum potential, generically (for the forward-mode adapter).
struct MlpDensity {
    x: Vec<f64>,
    y: Vec<f64>,
}

impl DualDensity for MlpDensity {
    fn dim(&self) -> usize {
        MLP_DIM
    }
    fn n_data(&self) -> usize {
        self.y.len()
    }
    fn datum<D: DualNum<Primitive = f64> + Copy>(&self, t: &[D], i: usize) -> D {
        let x = &self.x[i * IN..(i + 1) * IN];
        let mut f = t[MLP_DIM - 1];
        for h in 0..HID {
            let mut a = t[HID * IN + h];
            for (w, xk) in t[h * IN..(h + 1) * IN].iter().zip(x) {
                a += *w * *xk;
            }
            f += t[HID * IN + HID + h] * a.tanh();
        }
        let softplus = if f.re() > 0.0 { f + (-f).exp().ln_1p() } else { f.exp().ln_1p() };
        softplus - f * self.y[i]
    }
    fn prior<D: DualNum<Primitive = f64> + Copy>(&self, t: &[D]) -> D {
        t.iter().fold(D::from(0.0), |acc, v| acc + *v * *v) * 0.5
    }
}

/// The MLP with hand-written backpropagation.
struct Mlp {
    x: Vec<f64>,
    y: Vec<f64>,
}

impl Model for Mlp {
    fn dim(&self) -> usize {
        MLP_DIM
    }
    fn n_data(&self) -> usize {
        self.y.len()
    }
    fn grad_prior(&self, theta: &[f64], out: &mut [f64]) -> sgmcmc::Result<()> {
        out.copy_from_slice(theta);
        Ok(())
    }
    fn grad_data_sum(&self, t: &[f64], idx: &[usize], out: &mut [f64]) -> sgmcmc::Result<()> {
        out.fill(0.0);
        let (w1, rest) = t.split_at(HID * IN);
        let (b1, rest) = rest.split_at(HID);
        let (w2, b2) = rest.split_at(HID);
        let mut act = [0.0; HID];
        for &i in idx {
            let x = &self.x[i * IN..(i + 1) * IN];
            let mut f = b2[0];
            for h in 0..HID {
                let a: f64 = b1[h] + w1[h * IN..(h + 1) * IN].iter().zip(x).map(|(w, x)| w * x).sum::<f64>();
                act[h] = a.tanh();
                f += w2[h] * act[h];
            }
            let r = 1.0 / (1.0 + (-f).exp()) - self.y[i];
            out[MLP_DIM - 1] += r;
            for h in 0..HID {
                out[HID * IN + HID + h] += r * act[h];
                let da = r * w2[h] * (1.0 - act[h] * act[h]);
                out[HID * IN + h] += da;
                for (o, xk) in out[h * IN..(h + 1) * IN].iter_mut().zip(x) {
                    *o += da * xk;
                }
            }
        }
        Ok(())
    }
}

fn adapters(c: &mut Criterion) {
    let mut group = c.benchmark_group("gradient_per_minibatch");
    group.sample_size(50).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    let mut rng = stream(3, &[0]);
    let idx: Vec<usize> = (0..BATCH).map(|i| i * 997 % 10_000).collect();

    // Logistic S1.
    let hand = LogisticRegression::synthetic(100_000, 10, 10.0, 20_160_601).expect("model");
    let theta: Vec<f64> = (0..10).map(|j| 0.1 * j as f64 - 0.4).collect();
    let x = hand.features();
    let fwd = ForwardAd::new(LogisticDensity {
        x: x.outer_iter().map(|r| r.to_vec()).collect(),
        y: hand.labels().to_vec(),
        prior_var: 10.0,
    })
    .expect("adapter");
    let xt = Tensor::from_slice(x.as_slice().expect("contiguous"), (100_000, 10), &Device::Cpu).expect("tensor");
    let yt = Tensor::from_slice(hand.labels(), 100_000, &Device::Cpu).expect("tensor");
    let cnd = CandleModel::new(&[vec![10]], vec![xt, yt], Prior::Gaussian { sd: 10f64.sqrt() }, |p, b| {
        softplus_nll(&b[0].matmul(&p[0].unsqueeze(1)?)?.squeeze(1)?, &b[1])
    })
    .expect("adapter");
    let mut g = vec![0.0; 10];
    group.bench_function("logistic_S1/hand-written", |b| {
        b.iter(|| hand.grad_data_sum(black_box(&theta), &idx, &mut g).expect("ok"))
    });
    group.bench_function("logistic_S1/forward-ad", |b| {
        b.iter(|| fwd.grad_data_sum(black_box(&theta), &idx, &mut g).expect("ok"))
    });
    group.bench_function("logistic_S1/candle", |b| {
        b.iter(|| cnd.grad_data_sum(black_box(&theta), &idx, &mut g).expect("ok"))
    });
    let old = PerCoordinate(LogisticDensity {
        x: x.outer_iter().map(|r| r.to_vec()).collect(),
        y: hand.labels().to_vec(),
        prior_var: 10.0,
    });
    let mut g2 = vec![0.0; 10];
    old.grad_data_sum(&theta, &idx, &mut g2).unwrap();
    fwd.grad_data_sum(&theta, &idx, &mut g).expect("ok");
    assert_eq!(g, g2, "vector and scalar duals differ");
    group.bench_function("logistic_S1/forward-ad-per-coordinate", |b| {
        b.iter(|| old.grad_data_sum(black_box(&theta), &idx, &mut g))
    });
    let nd = NumDualVector(old.0);
    nd.grad_data_sum(&theta, &idx, &mut g2).unwrap();
    fwd.grad_data_sum(&theta, &idx, &mut g).expect("ok");
    assert_eq!(g, g2, "the crate's dual and num-dual's differ");
    group.bench_function("logistic_S1/forward-ad-num-dual", |b| {
        b.iter(|| nd.grad_data_sum(black_box(&theta), &idx, &mut g))
    });

    // Logistic at larger d: where forward mode meets reverse mode.
    for d in [30, 100, 300] {
        let hand = LogisticRegression::synthetic(10_000, d, 10.0, 7).expect("model");
        let theta: Vec<f64> = (0..d).map(|j| 0.01 * (j % 7) as f64 - 0.03).collect();
        let x = hand.features();
        let fwd = ForwardAd::new(LogisticDensity {
            x: x.outer_iter().map(|r| r.to_vec()).collect(),
            y: hand.labels().to_vec(),
            prior_var: 10.0,
        })
        .expect("adapter");
        let xt = Tensor::from_slice(x.as_slice().expect("contiguous"), (10_000, d), &Device::Cpu).expect("tensor");
        let yt = Tensor::from_slice(hand.labels(), 10_000, &Device::Cpu).expect("tensor");
        let cnd = CandleModel::new(&[vec![d]], vec![xt, yt], Prior::Gaussian { sd: 10f64.sqrt() }, |p, b| {
            softplus_nll(&b[0].matmul(&p[0].unsqueeze(1)?)?.squeeze(1)?, &b[1])
        })
        .expect("adapter");
        let mut g = vec![0.0; d];
        let mut g2 = vec![0.0; d];
        hand.grad_data_sum(&theta, &idx, &mut g).unwrap();
        fwd.grad_data_sum(&theta, &idx, &mut g2).expect("ok");
        let err = g.iter().zip(&g2).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(err < 1e-9, "d = {d}: forward-mode gradient differs by {err:e}");
        group.bench_function(format!("logistic_d{d}/hand-written"), |b| {
            b.iter(|| hand.grad_data_sum(black_box(&theta), &idx, &mut g).expect("ok"))
        });
        group.bench_function(format!("logistic_d{d}/forward-ad"), |b| {
            b.iter(|| fwd.grad_data_sum(black_box(&theta), &idx, &mut g).expect("ok"))
        });
        group.bench_function(format!("logistic_d{d}/candle"), |b| {
            b.iter(|| cnd.grad_data_sum(black_box(&theta), &idx, &mut g).expect("ok"))
        });
    }

    // MLP 20-50-1.
    let n = 10_000;
    let mut xs = vec![0.0; n * IN];
    normals(&mut rng, &mut xs);
    let ys: Vec<f64> = (0..n).map(|i| f64::from(u8::from(xs[i * IN] + xs[i * IN + 1] > 0.0))).collect();
    let mut theta = vec![0.0; MLP_DIM];
    normals(&mut rng, &mut theta);
    theta.iter_mut().for_each(|t| *t *= 0.2);
    let mlp = Mlp { x: xs.clone(), y: ys.clone() };
    let fmlp = ForwardAd::new(MlpDensity { x: xs.clone(), y: ys.clone() }).expect("adapter");
    let xt = Tensor::from_vec(xs, (n, IN), &Device::Cpu).expect("tensor");
    let yt = Tensor::from_vec(ys, n, &Device::Cpu).expect("tensor");
    let shapes = [vec![HID, IN], vec![HID], vec![HID], vec![1]];
    let cmlp = CandleModel::new(&shapes, vec![xt, yt], Prior::Gaussian { sd: 1.0 }, |p, b| {
        let a = b[0].matmul(&p[0].t()?)?.broadcast_add(&p[1])?.tanh()?;
        let f = a.matmul(&p[2].unsqueeze(1)?)?.squeeze(1)?.broadcast_add(&p[3])?;
        softplus_nll(&f, &b[1])
    })
    .expect("adapter");
    let mut g = vec![0.0; MLP_DIM];
    // The two agree (checked once, outside the timing).
    let mut g2 = vec![0.0; MLP_DIM];
    mlp.grad_data_sum(&theta, &idx, &mut g).unwrap();
    cmlp.grad_data_sum(&theta, &idx, &mut g2).expect("ok");
    let err = g.iter().zip(&g2).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(err < 1e-10, "MLP gradients differ by {err:e}");
    fmlp.grad_data_sum(&theta, &idx, &mut g2).expect("ok");
    let err = g.iter().zip(&g2).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(err < 1e-10, "forward-mode MLP gradient differs by {err:e}");
    group.bench_function("mlp_20-50-1/hand-written", |b| {
        b.iter(|| mlp.grad_data_sum(black_box(&theta), &idx, &mut g).expect("ok"))
    });
    group.bench_function("mlp_20-50-1/candle", |b| {
        b.iter(|| cmlp.grad_data_sum(black_box(&theta), &idx, &mut g).expect("ok"))
    });
    group.sample_size(10).measurement_time(Duration::from_secs(8));
    group.bench_function("mlp_20-50-1/forward-ad", |b| {
        b.iter(|| fmlp.grad_data_sum(black_box(&theta), &idx, &mut g).expect("ok"))
    });
    let old = PerCoordinate(MlpDensity { x: mlp.x.clone(), y: mlp.y.clone() });
    group.bench_function("mlp_20-50-1/forward-ad-per-coordinate", |b| {
        b.iter(|| old.grad_data_sum(black_box(&theta), &idx, &mut g))
    });
    let nd = NumDualVector(old.0);
    group.bench_function("mlp_20-50-1/forward-ad-num-dual", |b| {
        b.iter(|| nd.grad_data_sum(black_box(&theta), &idx, &mut g))
    });
    group.finish();
}

criterion_group!(benches, adapters);
criterion_main!(benches);
