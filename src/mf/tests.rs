use crate::mf::engine::Engine;
use crate::mf::fabric::LocalFabric;
use crate::mf::partition::{BlockPartition, RowShard};
use crate::mf::settings::{MfModel, MfRunSettings, MfUpdate};
use crate::mf::worker::{Worker, block_gradient};
use crate::models::Ratings;
use crate::numeric::lbfgs::Lbfgs;
use crate::numeric::rng::{fill_standard_normal, stream};
use crate::samplers::HamcmcSettings;

/// With one block, MF's block gradient of `MfModel::from_pmf(pmf)` is `pmf`'s gradient of
/// the potential over every rating (prior plus data, θ laid out as W then H in both).
#[test]
fn one_block_gradient_is_pmf_gradient() {
    use crate::models::model::Model;
    let r = Ratings::synthetic(7, 9, 3, 50, 0.5, 4).unwrap();
    let pmf = crate::models::Pmf::new(r.clone(), 5, 0.3, 2.0, 0.5).unwrap();
    let model = MfModel::from_pmf(&pmf, 0.1);
    assert_eq!((model.rank, model.noise_var, model.prior_var_w, model.prior_var_h), (5, 0.3, 2.0, 0.5));
    assert_eq!(model.offset, pmf.offset());
    let part = BlockPartition::even(7, 9, 1).unwrap();
    let shard = RowShard::new(&part, 0, &r).unwrap();
    let theta = pmf.random_start(0.7, 3);
    let mut mf = vec![0.0; theta.len()];
    block_gradient(&model.terms().unwrap(), &shard.blocks[0], 7 * 5, &theta, 1.0, &mut mf);
    let (mut prior, mut data) = (vec![0.0; theta.len()], vec![0.0; theta.len()]);
    pmf.grad_prior(&theta, &mut prior).unwrap();
    let all: Vec<usize> = (0..r.len()).collect();
    pmf.grad_data_sum(&theta, &all, &mut data).unwrap();
    for (j, (m, (p, d))) in mf.iter().zip(prior.iter().zip(&data)).enumerate() {
        let want = p + d;
        assert!((m - want).abs() <= 1e-12 * (1.0 + want.abs()), "coordinate {j}: MF {m} vs Pmf {want}");
    }
}

/// The reduced-dot L-BFGS of the workers equals [`Lbfgs`] on the concatenated vectors.
#[test]
fn worker_lbfgs_matches_dense_lbfgs() {
    let r = Ratings::synthetic(9, 7, 2, 40, 0.5, 1).unwrap();
    let part = BlockPartition::even(9, 7, 3).unwrap();
    let shards = RowShard::split(&part, &r).unwrap();
    let s: Vec<&RowShard> = shards.iter().collect();
    let sizes: Vec<usize> = s.iter().flat_map(|sh| sh.block_sizes()).collect();
    let model = MfModel { rank: 2, noise_var: 1.0, prior_var_w: 1.0, prior_var_h: 1.0, offset: 0.0, init_scale: 1.0 };
    let hs = HamcmcSettings { memory: 4, initial_scale: 0.7, ..Default::default() };
    let run = MfRunSettings { n_iter: 1, burn_in: 0, eval_every: 0, seed: 3 };
    let fabric = LocalFabric { blocks: 3, spare: Vec::new() };
    let mut e = Engine::new(fabric, s, Vec::new(), &model, &MfUpdate::Hamcmc(hs), &run, &sizes, 0).unwrap();
    e.hamcmc_init(&hs).unwrap();
    let d: usize = e.workers.iter().map(Worker::len).sum();
    let mut rng = stream(5, &[1]);
    let mut lb = Lbfgs::new(d, 3, 0.7).unwrap();
    // Three pairs (s, y = A s with A = diag(1 + i/d)) pushed to both.
    for tau in 0..3u64 {
        let mut sv = vec![0.0; d];
        fill_standard_normal(&mut rng, &mut sv);
        let yv: Vec<f64> = sv.iter().enumerate().map(|(i, v)| v * (1.0 + i as f64 / d as f64)).collect();
        lb.push(&sv, &yv).unwrap();
        let mut off = 0;
        for w in &mut e.workers {
            let n = w.len();
            w.x.copy_from_slice(&sv[off..off + n]);
            w.hist[0].fill(0.0);
            w.grad.copy_from_slice(&yv[off..off + n]);
            w.g_old.fill(0.0);
            off += n;
        }
        e.push_pair(0.0, 100 + tau, |w| (&w.x, &w.hist[0])).unwrap();
    }
    assert_eq!(e.ring.pairs.len(), 3);
    let (mut g, mut z) = (vec![0.0; d], vec![0.0; d]);
    fill_standard_normal(&mut rng, &mut g);
    fill_standard_normal(&mut rng, &mut z);
    let mut off = 0;
    for w in &mut e.workers {
        let n = w.len();
        w.g_old.copy_from_slice(&g[off..off + n]);
        w.noise.copy_from_slice(&z[off..off + n]);
        off += n;
    }
    e.apply_h_s(0.7).unwrap();
    let (mut hg, mut sz) = (vec![0.0; d], vec![0.0; d]);
    lb.apply_h(&g, &mut hg).unwrap();
    lb.apply_s(&z, &mut sz).unwrap();
    let step: Vec<f64> = e.workers.iter().flat_map(|w| w.step.clone()).collect();
    let szw: Vec<f64> = e.workers.iter().flat_map(|w| w.sz.clone()).collect();
    let err = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    assert!(err(&step, &hg) < 1e-12, "H g: {}", err(&step, &hg));
    assert!(err(&szw, &sz) < 1e-12, "S z: {}", err(&szw, &sz));
}
