//! Scaling over MPI ranks, measured in one launch: `mpirun --allow-run-as-root -np 2 target/release/examples/mpi_scaling`
//! (build with `cargo build --release --features mpi --example mpi_scaling`; one rank per core,
//! never oversubscribed: oversubscribed ranks busy-poll and the timings mean nothing).
//!
//! 1. Sharded SGLD, logistic regression N = 10⁶, d = 100, n = 1 000: iterations per second of
//!    the single-process run on the whole data (rank 0 alone, the others waiting) against the
//!    sharded run over all ranks (each holds N/R rows); the chains agree to ~1e-16 relative.
//! 2. Chains over ranks: 4 chains of SGLD (N = 10⁵, d = 20, n = 100), one chain at a time per
//!    process: wall time on rank 0 alone against `Runner::on(&cluster).run()` over all ranks (bit-identical
//!    draws).
//! 3. The latency of the exchange a sharded gradient makes (an all-gather of R·(d + 1) numbers).
//!
//! Ends with `RESULT {json}` (printed by rank 0).

use sgmcmc::distributed::mpi::topology::SimpleCommunicator;
use sgmcmc::distributed::mpi::traits::*;
use sgmcmc::distributed::{Cluster, Sharded, run_sharded};
use sgmcmc::ndarray::{Array1, s};
use sgmcmc::*;
use std::time::Instant;

fn shard(full: &LogisticRegression, rows: std::ops::Range<usize>) -> Result<LogisticRegression> {
    let x = full.features().slice(s![rows.clone(), ..]).to_owned();
    let y = Array1::from(full.labels()[rows].to_vec());
    LogisticRegression::new(&x, &y, full.prior_var())
}

fn main() -> Result<()> {
    let cluster = Cluster::init()?;
    let (me, size) = (cluster.rank(), cluster.size());
    let say = |msg: String| {
        if me == 0 {
            println!("{msg}");
        }
    };
    say(format!("{size} rank(s)"));

    // 1. Sharded SGLD.
    let (n, d, batch, iters) = (1_000_000, 100, 1_000, 3_000u64);
    eprintln!("[progress] rank {me}: building the data set (N = {n}, d = {d})");
    let full = LogisticRegression::synthetic(n, d, 10.0, 1)?;
    let rows = (me * n / size)..((me + 1) * n / size);
    let sharded = Sharded::new(&cluster, shard(&full, rows)?)?;
    let sgld = Sgld::new(SgldSettings::constant(1e-7), Minibatch::new(batch))?;
    let settings =
        RunSettings { n_iter: iters, burn_in: 0, seed: 4, check_model: false, parallel: false, ..Default::default() };
    let zero = vec![0.0; d];
    cluster.barrier();
    let mut single_rate = 0.0;
    let mut single = None;
    if me == 0 {
        let t = Instant::now();
        single = Some(Runner::new(&full, &sgld).start(&zero).settings(settings).run()?);
        single_rate = iters as f64 / t.elapsed().as_secs_f64();
    }
    cluster.barrier();
    let t = Instant::now();
    let out = run_sharded(&sharded, &sgld, std::slice::from_ref(&zero), &settings, &[])?;
    let sharded_rate = iters as f64 / t.elapsed().as_secs_f64();
    let gap = single.as_ref().map_or(0.0, |s| {
        let (a, b) = (
            s.estimate.samples(0).map(|x| x.draws().to_owned()),
            out.estimate.samples(0).map(|x| x.draws().to_owned()),
        );
        match (a, b) {
            (Some(a), Some(b)) => {
                let scale = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                a.iter().zip(b.iter()).fold(0.0f64, |m, (x, y)| m.max((x - y).abs())) / scale
            }
            _ => f64::NAN,
        }
    });
    say(format!(
        "Sharded SGLD (N = {n}, d = {d}, n = {batch}): {single_rate:.0} it/s on 1 rank, {sharded_rate:.0} it/s on {size} ranks: speed-up {:.2}, efficiency {:.0} %; chains agree to {gap:.1e} relative",
        sharded_rate / single_rate,
        100.0 * sharded_rate / single_rate / size as f64
    ));

    // 3. Latency of one exchange of R·(d + 1) numbers.
    let w = SimpleCommunicator::world();
    let part = vec![1.0f64; d + 1];
    let mut all = vec![0.0f64; size * (d + 1)];
    cluster.barrier();
    let reps = 20_000;
    let t = Instant::now();
    for _ in 0..reps {
        w.all_gather_into(&part[..], &mut all[..]);
    }
    let latency_us = t.elapsed().as_secs_f64() / reps as f64 * 1e6;
    say(format!("All-gather of {size} × {} numbers: {latency_us:.2} µs per call", d + 1));

    // 2. Chains over ranks.
    let lg = LogisticRegression::synthetic(100_000, 20, 10.0, 2)?;
    let sgld = Sgld::new(SgldSettings::constant(1e-6), Minibatch::new(100))?;
    let cs = RunSettings {
        n_iter: 40_000,
        burn_in: 0,
        n_chains: 4,
        seed: 5,
        parallel: false,
        storage: Storage::Moments,
        ..Default::default()
    };
    let inits = vec![vec![0.0; 20]; 4];
    cluster.barrier();
    let mut serial_s = 0.0;
    let mut serial_mean = None;
    if me == 0 {
        let t = Instant::now();
        let o = Runner::new(&lg, &sgld).starts(&inits).settings(cs).run()?;
        serial_s = t.elapsed().as_secs_f64();
        serial_mean = Some(o.estimate.mean()?);
    }
    cluster.barrier();
    let t = Instant::now();
    let o = Runner::new(&lg, &sgld).starts(&inits).settings(cs).on(&cluster).run()?;
    let mpi_s = t.elapsed().as_secs_f64();
    let identical = serial_mean.as_ref().is_none_or(|m| {
        o.estimate.mean().is_ok_and(|x| x.iter().zip(m.iter()).all(|(a, b)| a.to_bits() == b.to_bits()))
    });
    say(format!(
        "4 chains (N = 100 000, d = 20, 40 000 iterations each): {serial_s:.2} s on 1 rank, {mpi_s:.2} s on {size} ranks: speed-up {:.2}; pooled mean bit-identical: {identical}",
        serial_s / mpi_s
    ));
    say(format!(
        "RESULT {{\"example\":\"mpi_scaling\",\"ranks\":{size},\"sharded_sgld\":{{\"n\":{n},\"d\":{d},\"batch\":{batch},\"it_per_s_1_rank\":{single_rate:.1},\"it_per_s_ranks\":{sharded_rate:.1},\"speedup\":{:.3},\"max_rel_gap\":{gap:.3e}}},\"allgather_us\":{latency_us:.3},\"chains\":{{\"seconds_1_rank\":{serial_s:.3},\"seconds_ranks\":{mpi_s:.3},\"speedup\":{:.3},\"bit_identical\":{identical}}}}}",
        sharded_rate / single_rate,
        serial_s / mpi_s
    ));
    Ok(())
}
