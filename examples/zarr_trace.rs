//! Writes a run's trace as a Zarr store that ArviZ opens (feature `zarr`), next to the same draws
//! as `.npy` for comparison:
//!
//! ```text
//! cargo run --release --features zarr --example zarr_trace [DIR]
//! python -c "import xarray as xr, arviz as az; print(az.summary(az.from_datatree(xr.open_datatree('DIR/trace.zarr', engine='zarr'))))"
//! ```
//!
//! `scripts/check-arviz-zarr` runs both and checks, in Python, that ArviZ reads the very draws
//! of the `.npy` file. DIR defaults to `target/zarr_trace`.
//!
//! With `--killed DIR` it writes `DIR/killed.zarr` as a run killed mid-write leaves it: the
//! layout and the first two of four chains, then the process aborts (no cleanup, exit by
//! SIGABRT). The crate's reader and the documented ArviZ recipe refuse that trace (its
//! completeness marks: `sample_stats/draws_written` per chain and the root attribute
//! `sgmcmc_finished`).

use sgmcmc::export;
use sgmcmc::prelude::*;

fn main() -> sgmcmc::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let killed = args.first().is_some_and(|a| a == "--killed");
    let dir = args.iter().find(|a| !a.starts_with("--")).cloned().unwrap_or_else(|| "target/zarr_trace".into());
    let dir = std::path::Path::new(&dir);
    let model = LogisticRegression::synthetic(5_000, 4, 10.0, 1)?;
    let sgld = Sgld::new(SgldSettings::constant(2e-4), Minibatch::new(100))?;
    let settings = RunSettings { n_iter: 3_000, burn_in: 1_000, n_chains: 4, seed: 12, ..Default::default() };
    let out = Runner::new(&model, &sgld).start(&[0.0; 4]).settings(settings).run()?;
    if killed {
        let n = out.estimate.samples(0).map_or(0, |s| s.len());
        let trace = export::ZarrTrace::create(dir.join("killed.zarr"), 4, n, 4, false)?;
        for c in 0..2 {
            let s = out.estimate.samples(c).ok_or(sgmcmc::Error::NotStored { what: "samples" })?;
            trace.write_chain(c, s)?;
        }
        println!("wrote chains 0 and 1 of 4 to {}; aborting the process mid-write", trace.path().display());
        std::process::abort();
    }
    let trace = export::write_zarr(dir.join("trace.zarr"), &out.estimate)?;
    export::write_npy(dir, &out.estimate)?;
    let (c, n, d) = trace.shape();
    println!("wrote {} ({c} chains × {n} draws × {d}) and {}/draws.npy", trace.path().display(), dir.display());
    let mean = out.estimate.mean()?;
    println!("posterior mean (pooled): {:?}", mean.iter().map(|m| format!("{m:.4}")).collect::<Vec<_>>());
    println!(
        "RESULT {{\"example\":\"zarr_trace\",\"path\":\"{}\",\"chains\":{c},\"draws\":{n},\"dim\":{d}}}",
        trace.path().display()
    );
    Ok(())
}
