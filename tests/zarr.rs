//! Zarr traces (feature `zarr`): what is written reads back bit for bit, in the ArviZ
//! InferenceData layout, and bad input is a typed error. (That ArviZ opens the store is checked
//! by `scripts/check-arviz-zarr`, which needs Python.)
#![cfg(feature = "zarr")]

use sgmcmc::export::{ZarrTrace, write_zarr};
use sgmcmc::prelude::*;
use sgmcmc::{Constrained, Layout, Storage};
use sgmcmc::{Error, Samples};

fn out(storage: Storage) -> RunOutput<Sgld> {
    let model = LinearGaussian::synthetic(300, 3, 1.0, 10.0, 2).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-4), Minibatch::new(30)).unwrap();
    let s = RunSettings { n_iter: 700, burn_in: 200, n_chains: 3, storage, seed: 4, ..Default::default() };
    Runner::new(&model, &sgld).start(&[0.0; 3]).settings(s).run().unwrap()
}

fn json(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn a_trace_reads_back_in_the_arviz_layout() {
    let o = out(Storage::SamplesAndGradients);
    let dir = std::env::temp_dir().join(format!("sgmcmc_zarr_test_{}", std::process::id()));
    let path = dir.join("trace.zarr");
    let trace = write_zarr(&path, &o.estimate).unwrap();
    assert_eq!(trace.shape(), (3, 500, 3));
    for c in 0..3 {
        let back = trace.read_chain(c).unwrap();
        let want = o.estimate.samples(c).unwrap().draws();
        assert!(back.iter().zip(want.iter()).all(|(a, b)| a.to_bits() == b.to_bits()), "chain {c}");
    }
    // Layout: groups posterior and sample_stats, named dimensions, one chunk per chain.
    let theta = json(&path.join("posterior/theta/zarr.json"));
    assert!(theta.contains("\"dimension_names\"") && theta.contains("\"chain\"") && theta.contains("\"theta_dim_0\""));
    assert!(theta.contains("\"chunk_shape\"") && theta.contains("500"));
    let root = json(&path.join("zarr.json"));
    assert!(root.contains("\"group\"") && root.contains("\"consolidated_metadata\""));
    // Consolidated keys in sorted order (zarr-python needs each group's children contiguous).
    let keys: Vec<usize> = ["\"posterior\"", "\"posterior/theta\"", "\"sample_stats\"", "\"sample_stats/weight\""]
        .iter()
        .map(|k| root.find(k).expect("consolidated key"))
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    assert!(root.contains("\"sample_stats/step_size\""));
    // SGLD's step size at every draw is its constant step.
    let steps = o.estimate.samples(0).unwrap().step_sizes().expect("a run records step sizes");
    assert!(steps.iter().all(|&h| h == 1e-4), "{:?}", &steps.as_slice().unwrap()[..3]);
    for a in [
        "sample_stats/weight",
        "sample_stats/cost",
        "sample_stats/step_size",
        "sample_stats/gradient",
        "posterior/chain",
        "posterior/draw",
    ] {
        assert!(path.join(a).join("zarr.json").exists(), "{a}");
    }
    for c in 0..3 {
        assert!(path.join(format!("posterior/theta/c/{c}/0/0")).exists(), "chunk of chain {c}");
    }
    // Another process (rank) opens the layout and rewrites a chain in place.
    let again = ZarrTrace::open(&path).unwrap();
    assert_eq!(again.shape(), (3, 500, 3));
    again.write_chain(2, o.estimate.samples(0).unwrap()).unwrap();
    assert_eq!(again.read_chain(2).unwrap(), o.estimate.samples(0).unwrap().draws());
    // Writing again replaces the trace.
    let t2 = write_zarr(&path, &out(Storage::Samples).estimate).unwrap();
    assert!(!path.join("sample_stats/gradient").exists());
    assert_eq!(t2.shape(), (3, 500, 3));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_input_is_a_typed_error() {
    let dir = std::env::temp_dir().join(format!("sgmcmc_zarr_bad_{}", std::process::id()));
    assert!(matches!(ZarrTrace::create(dir.join("a"), 0, 5, 2, false), Err(Error::EmptyData { .. })));
    let t = ZarrTrace::create(dir.join("b"), 2, 5, 2, true).unwrap();
    let s = Samples::new(ndarray::Array2::zeros((5, 2)), ndarray::Array1::ones(5), None).unwrap();
    assert!(matches!(t.write_chain(2, &s), Err(Error::InvalidParameter { name: "chain", .. })));
    assert!(matches!(t.write_chain(0, &s), Err(Error::NotStored { .. })));
    let short = Samples::new(ndarray::Array2::zeros((4, 2)), ndarray::Array1::ones(4), None).unwrap();
    assert!(matches!(t.write_chain(0, &short), Err(Error::DimensionMismatch { .. })));
    assert!(matches!(ZarrTrace::open(dir.join("missing")), Err(Error::Io { .. })));
    let streaming = out(Storage::Moments);
    assert!(matches!(write_zarr(dir.join("c"), &streaming.estimate), Err(Error::NotStored { .. })));
    std::fs::remove_dir_all(&dir).ok();
}

/// A model with named, constrained blocks: one Zarr variable per block, named and shaped as the
/// block, holding the constrained draws bit for bit; `open` finds the variables again.
#[test]
fn a_named_block_trace_has_one_variable_per_block() {
    // Any model of constrained dimension 7 will do: a 2 × 2 real matrix, a scalar, a 2-simplex.
    let lg = LinearGaussian::synthetic(200, 7, 1.0, 10.0, 3).unwrap();
    let layout = Layout::new().real("beta", &[2, 2]).positive("sigma", &[]).simplex("w", 2);
    let model = Constrained::new(lg, layout.clone()).unwrap();
    let sgld = Sgld::new(SgldSettings::constant(1e-5), Minibatch::new(20)).unwrap();
    let s = RunSettings { n_iter: 400, burn_in: 100, n_chains: 2, seed: 9, ..Default::default() };
    let o = Runner::new(&model, &sgld).start(&[0.0; 6]).settings(s).run().unwrap();
    let dir = std::env::temp_dir().join(format!("sgmcmc_zarr_named_{}", std::process::id()));
    let path = dir.join("named.zarr");
    let trace = model.write_zarr(&path, &o.estimate).unwrap();
    assert_eq!(trace.shape(), (2, 300, 7));
    let theta = layout.constrain_estimate(&o.estimate).unwrap();
    for c in 0..2 {
        let back = trace.read_chain(c).unwrap();
        let want = theta.samples(c).unwrap().draws();
        assert!(back.iter().zip(want.iter()).all(|(a, b)| a.to_bits() == b.to_bits()), "chain {c}");
    }
    let meta = |v: &str| json(&path.join(format!("posterior/{v}/zarr.json")));
    let beta = meta("beta");
    assert!(beta.contains("\"beta_dim_0\"") && beta.contains("\"beta_dim_1\""), "{beta}");
    assert!(beta.contains("[\n    2,\n    300,\n    2,\n    2\n  ]") || beta.contains("[2,300,2,2]"), "{beta}");
    let sigma = meta("sigma");
    assert!(!sigma.contains("sigma_dim_0"), "a scalar has dims (chain, draw): {sigma}");
    assert!(meta("w").contains("\"w_dim_0\""));
    assert!(!path.join("posterior/theta").exists());
    // Another process opens it and finds the variables and their order.
    let again = ZarrTrace::open(&path).unwrap();
    assert_eq!(again.shape(), (2, 300, 7));
    assert_eq!(again.read_chain(1).unwrap(), trace.read_chain(1).unwrap());
    // The wrong dimension is refused.
    assert!(matches!(
        sgmcmc::export::write_zarr_named(dir.join("x.zarr"), &o.estimate, &layout),
        Err(Error::DimensionMismatch { .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}

/// A trace whose writer stopped after two of three chains (as a killed process leaves it):
/// the crate's reader refuses the unwritten chain instead of returning NaN, `completeness` says
/// what is there, and `finish` refuses to mark it finished; the whole trace reads as complete.
#[test]
fn a_partial_trace_is_refused_not_read_as_nan() {
    let o = out(Storage::Samples);
    let dir = std::env::temp_dir().join(format!("sgmcmc_zarr_partial_{}", std::process::id()));
    let path = dir.join("partial.zarr");
    let parts: Vec<&Samples> = (0..3).map(|c| o.estimate.samples(c).unwrap()).collect();
    {
        let trace = ZarrTrace::create(&path, 3, 500, 3, false).unwrap();
        trace.write_chain(0, parts[0]).unwrap();
        trace.write_chain(1, parts[1]).unwrap();
        // The writer ends here, without finishing.
    }
    let trace = ZarrTrace::open(&path).unwrap();
    let done = trace.completeness().unwrap();
    assert_eq!(done.draws_written, vec![500, 500, 0]);
    assert!(!done.finished && !done.is_complete(500));
    assert_eq!(trace.read_chain(1).unwrap(), parts[1].draws());
    let e = trace.read_chain(2).unwrap_err();
    assert_eq!(e, Error::IncompleteTrace { path: path.display().to_string(), chain: 2, written: 0, expected: 500 });
    assert!(e.to_string().contains("chain 2 has 0 of 500 draws written"), "{e}");
    assert!(matches!(trace.finish().unwrap_err(), Error::IncompleteTrace { chain: 2, .. }));
    // The last chain written: the trace can be finished, and reads as complete.
    trace.write_chain(2, parts[2]).unwrap();
    trace.finish().unwrap();
    let done = ZarrTrace::open(&path).unwrap().completeness().unwrap();
    assert!(done.finished && done.is_complete(500), "{done:?}");
    let whole = write_zarr(dir.join("whole.zarr"), &o.estimate).unwrap();
    assert!(whole.completeness().unwrap().is_complete(500));
    std::fs::remove_dir_all(&dir).ok();
}
