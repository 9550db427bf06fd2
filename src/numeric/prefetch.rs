//! Software prefetch, for models that gather rows of a large data set at random: one of the
//! crate's two uses of `unsafe` (the other: the AVX2 dispatch of the models' row kernels).
//!
//! A minibatch gradient on a data set larger than the caches spends its time waiting for rows
//! drawn at random, which the hardware prefetcher cannot guess. Asking for a row some rows before
//! it is used lets many rows' cache misses overlap. An ordinary load cannot do this well: a load
//! that misses occupies the core's load queue and stalls retirement until the data arrive,
//! whereas a prefetch instruction does not wait for the data. The built-in models prefetch each
//! row [`PREFETCH_DISTANCE`] rows before they use it, one row per row used; a model of your own
//! can do the same with [`prefetch_row`]:
//!
//! ```
//! use sgmcmc::prefetch::{PREFETCH_DISTANCE, prefetch_row};
//!
//! /// Σᵢ xᵢ over the rows `idx` of a row-major N × d matrix, prefetching ahead.
//! fn row_sum(data: &[f64], d: usize, idx: &[usize], out: &mut [f64]) {
//!     for (k, &i) in idx.iter().enumerate() {
//!         if let Some(&ahead) = idx.get(k + PREFETCH_DISTANCE) {
//!             prefetch_row(&data[ahead * d..(ahead + 1) * d]);
//!         }
//!         for (o, x) in out.iter_mut().zip(&data[i * d..(i + 1) * d]) {
//!             *o += x;
//!         }
//!     }
//! }
//! # let mut out = [0.0; 2];
//! # row_sum(&[1.0, 2.0, 3.0, 4.0], 2, &[1, 0, 1], &mut out);
//! # assert_eq!(out, [7.0, 10.0]);
//! ```
//!
//! The hint brings lines into the L2 cache (`PREFETCHT1`), not L1: L1 prefetches of rows far ahead
//! compete with the rows in use for L1's space and fill buffers. `cargo run --release --example
//! gather` measures the gather on your machine.
//!
//! Stable Rust offers prefetching only through `core::arch` intrinsics that take a raw pointer
//! and are therefore `unsafe fn`. [`prefetch`] wraps the x86-64 one behind a safe signature; on
//! other architectures it does nothing (the gather is then as fast as ordinary loads make it).

#![allow(unsafe_code)]

/// How many rows ahead of the row in use the built-in models prefetch: one row prefetched per
/// row used, at a fixed distance (shorter distances leave the rows' latency exposed; longer
/// ones gained nothing).
pub const PREFETCH_DISTANCE: usize = 16;

/// Hints the processor to bring the cache line holding `*x` into the L2 cache, without waiting
/// for it. Has no effect on any value, never faults, and costs one instruction; does nothing on
/// processors other than x86-64.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        // SAFETY: `_mm_prefetch` (PREFETCHT1, part of SSE, which every x86-64 processor has)
        // is a hint: it reads no value into a register, writes nothing, and by the
        // architecture's definition never raises a fault, even for an unmapped or invalid
        // address (Intel SDM vol. 2B, "PREFETCHh"; AMD APM vol. 3, "PREFETCHlevel"). The
        // address here is moreover that of a live reference, so it is valid and aligned.
        unsafe { _mm_prefetch::<_MM_HINT_T1>((x as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Prefetches every cache line of `row` (a row of a data set about to be used): the element at
/// each multiple of 64 bytes from its start, and its last element (the row need not start on a
/// line boundary). Nothing for an empty row.
#[inline(always)]
pub fn prefetch_row<T>(row: &[T]) {
    let step = (64 / size_of::<T>().max(1)).max(1);
    let mut k = 0;
    while k < row.len() {
        prefetch(&row[k]);
        k += step;
    }
    if let Some(last) = row.last() {
        prefetch(last);
    }
}

/// The size above which a data set is treated as larger than the caches: 1 MiB, a core's L2 on
/// current x86 (1–2 MiB). Below it, rows drawn at random come from L1/L2, so prefetching them is
/// pure overhead and huge pages save nothing; above it they come from L3 or memory, and a
/// prefetch saves most of their latency.
pub(crate) const LARGE_DATA_BYTES: usize = 1 << 20;

/// Allocates a buffer of `capacity` elements for a large data set and, on Linux, asks the kernel
/// to back it with huge pages (2 MiB) when it is touched, then fills it from `values`.
///
/// Rows drawn at random from a data set of 4 KiB pages each sit on a different page: without huge
/// pages every row costs a page walk, which a prefetch does not fully hide. With transparent huge pages in `madvise` or
/// `always` mode (the defaults of the common Linux distributions) a 160 MB data set needs 80
/// TLB entries instead of 40 000. The advice changes no value and nothing else; where it is not
/// available (other systems, THP disabled, buffers below 1 MiB) the buffer is an ordinary `Vec`.
pub(crate) fn huge_page_vec<T: Copy>(capacity: usize, values: impl Iterator<Item = T>) -> Vec<T> {
    let mut v = Vec::with_capacity(capacity);
    advise_huge_pages(&v);
    v.extend(values);
    v
}

/// `madvise(MADV_HUGEPAGE)` on the whole 4 KiB pages inside `v`'s allocation (before they are
/// touched). Errors are ignored: the advice is only a hint.
fn advise_huge_pages<T>(v: &Vec<T>) {
    let bytes = v.capacity() * size_of::<T>();
    if bytes <= LARGE_DATA_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = v.as_ptr() as usize;
        let first = start.next_multiple_of(PAGE);
        let end = (start + bytes) / PAGE * PAGE;
        if end > first {
            // SAFETY: madvise with MADV_HUGEPAGE only sets the kernel's page-size policy for the
            // range: it reads and writes no memory of the process and keeps every mapping and
            // value as it is (madvise(2)). The range is page-aligned and lies inside `v`'s live
            // allocation (rounded inwards to whole pages); if the kernel refuses the advice (no
            // THP support, an unsuitable mapping) it returns an error, which is ignored.
            let _ = unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefetching changes nothing, on any element type and row length (including empty rows and
    /// rows shorter or longer than a cache line), and does not fault at the ends of a buffer.
    #[test]
    fn prefetch_is_a_pure_hint() {
        let data: Vec<f64> = (0..1_000).map(f64::from).collect();
        let copy = data.clone();
        for len in [0, 1, 7, 8, 9, 20, 100, 1_000] {
            prefetch_row(&data[..len]);
            prefetch_row(&data[data.len() - len..]);
        }
        let small: Vec<f32> = (0..33).map(|v| v as f32).collect();
        prefetch_row(&small);
        prefetch(&small[32]);
        prefetch(&());
        prefetch_row::<()>(&[(), ()]);
        assert_eq!(data, copy);
        assert_eq!(small[32], 32.0);
    }

    /// A huge-page buffer holds exactly the values given, small or large (above the 1 MiB at
    /// which the advice is given).
    #[test]
    fn huge_page_vec_holds_the_values() {
        for n in [0usize, 10, 1 << 20] {
            let v = huge_page_vec(n, (0..n).map(|i| i as f64));
            assert_eq!(v.len(), n);
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as f64));
        }
    }
}
