//! The inner loop of inspection: the run of plain bytes inside a JSON string.
//!
//! [`plain_run`] finds the first `"`, `\` or control character at or after an offset, and
//! says whether the bytes before it hold a non-ASCII byte (only such runs need UTF-8
//! validation, see [`super::decode`]). Base64 media, most of any large body, is one long
//! plain ASCII run, so this loop decides inspection throughput.
//!
//! On x86-64 it uses, detected at run time, AVX-512BW (128 bytes per step, two compares
//! into mask registers per 64 bytes) or AVX2 (a string's first 64 bytes alone, then 128
//! bytes per step, two compares per 32 bytes); elsewhere a portable loop that LLVM vectorizes with SSE2 does the same work.
//! The two compares flag exactly the bytes that end or complicate a run, so a block of
//! prose or base64 is passed over without a closer look.
//! This is the crate's only `unsafe` code: the vector loads and the calls into the
//! `#[target_feature]` functions, each with its safety argument.

#![allow(unsafe_code)]

/// A run of plain string bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    /// Offset of the first `"`, `\` or control character, or the text's length.
    pub(super) end: usize,
    /// Whether a byte of the run is non-ASCII (`>= 0x80`).
    pub(super) non_ascii: bool,
}

/// The run of plain string bytes of `b` starting at `from`.
#[inline]
pub(super) fn plain_run(b: &[u8], from: usize) -> Run {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512bw") {
        // SAFETY: the CPU has AVX-512BW (checked just above).
        return unsafe { avx512::plain_run(b, from) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, the only requirement of `avx2::plain_run`.
        return unsafe { avx2::plain_run(b, from) };
    }
    portable(b, from)
}

fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

/// The bytes from `i` on, one at a time (the tail shorter than a block, or a hit block).
fn scalar(b: &[u8], mut i: usize, mut non_ascii: bool) -> Run {
    while let Some(&c) = b.get(i) {
        if is_special(c) {
            break;
        }
        non_ascii |= c >= 0x80;
        i += 1;
    }
    Run {
        end: i.min(b.len()),
        non_ascii,
    }
}

/// The run's end inside a vector block that starts at `at`, if the block has a special
/// byte: bit `k` of `special` and `high` is byte `at + k`, and `non_ascii` covers the
/// bytes before the block.
#[inline(always)]
fn in_block(at: usize, special: u64, high: u64, non_ascii: bool) -> Option<Run> {
    (special != 0).then(|| {
        let k = special.trailing_zeros();
        Run {
            end: at + k as usize,
            non_ascii: non_ascii | (high & ((1u64 << k) - 1) != 0),
        }
    })
}

/// 64-byte blocks with a branch-free OR over each block; the tail byte by byte.
fn portable(b: &[u8], from: usize) -> Run {
    const BLOCK: usize = 64;
    let mut i = from;
    let mut high = 0u8;
    while let Some(block) = b.get(i..i + BLOCK) {
        let (mut hit, mut block_high) = (0u8, 0u8);
        for &c in block {
            hit |= u8::from(c == b'"') | u8::from(c == b'\\') | u8::from(c < 0x20);
            block_high |= c;
        }
        if hit != 0 {
            break;
        }
        high |= block_high;
        i += BLOCK;
    }
    scalar(b, i, high >= 0x80)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8, _mm256_testz_si256, _mm256_xor_si256,
    };

    use super::{scalar, Run};

    /// Bit i set where byte i of `v` is `"`, `\` or a control character, and where it is
    /// non-ASCII.
    #[target_feature(enable = "avx2")]
    fn masks(v: __m256i) -> (u32, u32) {
        let special = _mm256_or_si256(
            _mm256_or_si256(
                _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8)),
                _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8)),
            ),
            // Signed: true for 0x00..=0x1F and for every byte >= 0x80 (negative as i8).
            _mm256_cmpgt_epi8(_mm256_set1_epi8(0x20), v),
        );
        let high = _mm256_movemask_epi8(v) as u32;
        (_mm256_movemask_epi8(special) as u32 & !high, high)
    }

    /// [`masks`] of 64 bytes, `x` then `y`.
    #[target_feature(enable = "avx2")]
    fn masks64(x: __m256i, y: __m256i) -> (u64, u64) {
        let ((sx, hx), (sy, hy)) = (masks(x), masks(y));
        (
            u64::from(sx) | u64::from(sy) << 32,
            u64::from(hx) | u64::from(hy) << 32,
        )
    }

    /// Bytes that need a closer look, exactly: control characters, `"`, `\` and every
    /// non-ASCII byte, so prose (full of spaces) and base64 alike stay on the fast path.
    /// Two compares: flipping bit 1 maps `"` (0x22) to 0x20 and space and `!` to 0x22 and
    /// 0x23, keeps 0x00..=0x1F below 0x20 and every other ASCII byte at 0x24 or above, so
    /// signed `(v ^ 2) < 0x21` is true for control, `"` and non-ASCII bytes only.
    #[target_feature(enable = "avx2")]
    pub(super) fn maybe(v: __m256i) -> __m256i {
        let flipped = _mm256_xor_si256(v, _mm256_set1_epi8(0x02));
        _mm256_or_si256(
            _mm256_cmpgt_epi8(_mm256_set1_epi8(0x21), flipped),
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8)),
        )
    }

    /// One 64-byte block at `i`: the run's end if the block holds a special byte; else
    /// `non_ascii` takes in the block's non-ASCII bytes.
    ///
    /// # Safety
    /// The CPU must support AVX2, and `i + 64 <= b.len()`.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn block64(b: &[u8], i: usize, non_ascii: &mut bool) -> Option<Run> {
        // SAFETY: `i + 64 <= b.len()` (the caller's promise), so both 32-byte reads are
        // inside `b`; `loadu` has no alignment requirement.
        let (x, y) = unsafe {
            let p = b.as_ptr().add(i);
            (
                _mm256_loadu_si256(p.cast()),
                _mm256_loadu_si256(p.add(32).cast()),
            )
        };
        let any = _mm256_or_si256(maybe(x), maybe(y));
        if _mm256_testz_si256(any, any) != 0 {
            return None;
        }
        let (special, high) = masks64(x, y);
        if let Some(run) = super::in_block(i, special, high, *non_ascii) {
            return Some(run);
        }
        *non_ascii |= high != 0;
        None
    }

    /// [`super::plain_run`] with AVX2.
    ///
    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn plain_run(b: &[u8], from: usize) -> Run {
        let mut i = from;
        let mut non_ascii = false;
        // Most strings (member names, short values) end within their first 64 bytes: that
        // block is looked at alone, before the 128-byte steps, which would read twice as
        // much to find the end.
        if i + 64 <= b.len() {
            // SAFETY: AVX2 (this function's own requirement) and `i + 64 <= b.len()`.
            if let Some(run) = unsafe { block64(b, i, &mut non_ascii) } {
                return run;
            }
            i += 64;
        }
        // 128 bytes a step while nothing needs a look (long strings: media, prose), so the
        // test and the branch are paid once per four vectors.
        while i + 128 <= b.len() {
            // SAFETY: `i + 128 <= b.len()`, so the four 32-byte reads are inside `b`.
            let (w, x, y, z) = unsafe {
                let p = b.as_ptr().add(i);
                (
                    _mm256_loadu_si256(p.cast()),
                    _mm256_loadu_si256(p.add(32).cast()),
                    _mm256_loadu_si256(p.add(64).cast()),
                    _mm256_loadu_si256(p.add(96).cast()),
                )
            };
            let any = _mm256_or_si256(
                _mm256_or_si256(maybe(w), maybe(x)),
                _mm256_or_si256(maybe(y), maybe(z)),
            );
            if _mm256_testz_si256(any, any) == 0 {
                break;
            }
            i += 128;
        }
        while i + 64 <= b.len() {
            // SAFETY: AVX2 (this function's own requirement) and `i + 64 <= b.len()`.
            if let Some(run) = unsafe { block64(b, i, &mut non_ascii) } {
                return run;
            }
            i += 64;
        }
        if i < b.len() && b.len() >= 64 {
            // The tail: the text's last 64 bytes, read again from before `i` and shifted
            // past it, so short strings near the end (the last keys) skip the byte loop.
            let base = b.len() - 64;
            // SAFETY: `base + 64 == b.len()`, so both 32-byte reads are inside `b`.
            let (x, y) = unsafe {
                let p = b.as_ptr().add(base);
                (
                    _mm256_loadu_si256(p.cast()),
                    _mm256_loadu_si256(p.add(32).cast()),
                )
            };
            let (special, high) = masks64(x, y);
            // `i > base`: the loop above stopped because `i + 64 > b.len()`.
            let shift = i - base;
            let (special, high) = (special >> shift, high >> shift);
            return super::in_block(i, special, high, non_ascii).unwrap_or(Run {
                end: b.len(),
                non_ascii: non_ascii | (high != 0),
            });
        }
        scalar(b, i, non_ascii)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::{
        __m512i, _mm512_cmpeq_epi8_mask, _mm512_cmplt_epi8_mask, _mm512_cmplt_epu8_mask,
        _mm512_loadu_si512, _mm512_movepi8_mask, _mm512_set1_epi8, _mm512_xor_si512,
    };

    use super::{scalar, Run};

    /// Which of the 64 bytes are special (`"`, `\`, below 0x20) and which are non-ASCII.
    #[target_feature(enable = "avx512bw")]
    fn masks(v: __m512i) -> (u64, u64) {
        let special = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8))
            | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8))
            | _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20));
        (special, _mm512_movepi8_mask(v))
    }

    /// Bytes that need a closer look, exactly (as the AVX2 loop's, with the same bit-1 flip):
    /// two compares into mask registers per 64 bytes.
    #[target_feature(enable = "avx512bw")]
    pub(super) fn maybe(v: __m512i) -> u64 {
        let flipped = _mm512_xor_si512(v, _mm512_set1_epi8(0x02));
        _mm512_cmplt_epi8_mask(flipped, _mm512_set1_epi8(0x21))
            | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8))
    }

    /// [`super::plain_run`] 128 bytes per step.
    ///
    /// # Safety
    /// The CPU must support AVX-512BW.
    #[target_feature(enable = "avx512bw")]
    pub(super) unsafe fn plain_run(b: &[u8], from: usize) -> Run {
        let mut i = from;
        let mut non_ascii = false;
        while i + 128 <= b.len() {
            // SAFETY: `i + 128 <= b.len()`, so both 64-byte unaligned loads are in bounds.
            let (x, y) = unsafe {
                let p = b.as_ptr().add(i);
                (
                    _mm512_loadu_si512(p.cast()),
                    _mm512_loadu_si512(p.add(64).cast()),
                )
            };
            if maybe(x) | maybe(y) != 0 {
                for (at, v) in [(i, x), (i + 64, y)] {
                    let (special, high) = masks(v);
                    if let Some(run) = super::in_block(at, special, high, non_ascii) {
                        return run;
                    }
                    non_ascii |= high != 0;
                }
            }
            i += 128;
        }
        // The tail, shorter than a step: whole 64-byte blocks, the last one read again
        // from before `i` and shifted past it (as in the AVX2 loop).
        while i < b.len() && b.len() >= 64 {
            let base = (b.len() - 64).min(i);
            // SAFETY: `base + 64 <= b.len()`.
            let v = unsafe { _mm512_loadu_si512(b.as_ptr().add(base).cast()) };
            let (special, high) = masks(v);
            let shift = i - base;
            let (special, high) = (special >> shift, high >> shift);
            if let Some(run) = super::in_block(i, special, high, non_ascii) {
                return run;
            }
            non_ascii |= high != 0;
            i = base + 64;
        }
        scalar(b, i, non_ascii)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, one byte at a time.
    fn reference(b: &[u8], from: usize) -> Run {
        scalar(b, from, false)
    }

    /// Every special and non-ASCII byte at every position of a block and its neighbours,
    /// from every start offset near it: the fast paths agree with the definition.
    #[test]
    fn agrees_with_the_definition_everywhere() {
        let base: Vec<u8> = (0..300u32)
            .map(|i| b"ABCxyz019+/ !#"[i as usize % 14])
            .collect();
        let probes: &[&[u8]] = &[
            b"\"",
            b"\\",
            b"\x00",
            b"\x1f",
            b"\x7f",
            b"\x80",
            b"\xff",
            b"\xc3\xa9",
            b" ",
            b"!",
            b"#",
            b"\xc3\xa9\"",
        ];
        // Texts of 300 and 200 bytes (128-byte steps, 64-byte blocks and a tail), 64 (one
        // block, no loop step) and 40 (shorter than any block), a probe at every position,
        // read from near it and near the end.
        for (len, probe) in [300, 200, 64, 40]
            .into_iter()
            .flat_map(|len| probes.iter().map(move |p| (len, p)))
        {
            for at in 0..=len - probe.len() {
                let mut b = base[..len].to_vec();
                b.splice(at..at + probe.len(), probe.iter().copied());
                let near_end = [len - 1, len - 33, len.saturating_sub(65), len];
                for from in [0, 1, 31, 32, 63, 64, at.saturating_sub(1), at]
                    .into_iter()
                    .chain(near_end)
                    .filter(|&f| f <= len)
                {
                    let want = reference(&b, from);
                    assert_eq!(
                        portable(&b, from),
                        want,
                        "portable {probe:?} at {at} from {from}"
                    );
                    assert_eq!(
                        plain_run(&b, from),
                        want,
                        "dispatch {probe:?} at {at} from {from}"
                    );
                    #[cfg(target_arch = "x86_64")]
                    if std::arch::is_x86_feature_detected!("avx2") {
                        // SAFETY: the CPU has AVX2.
                        let got = unsafe { avx2::plain_run(&b, from) };
                        assert_eq!(got, want, "avx2 {probe:?} at {at} from {from}");
                    }
                    #[cfg(target_arch = "x86_64")]
                    if std::arch::is_x86_feature_detected!("avx512bw") {
                        // SAFETY: the CPU has AVX-512BW.
                        let got = unsafe { avx512::plain_run(&b, from) };
                        assert_eq!(got, want, "avx512 {probe:?} at {at} from {from}");
                    }
                }
            }
        }
    }

    /// The vector prefilters flag exactly the special and non-ASCII bytes, all 256 of them
    /// checked (a miss would be a wrong run; an extra hit, a slow one).
    #[test]
    fn prefilters_flag_exactly_the_bytes_that_need_a_look() {
        let flagged = |c: u8| is_special(c) || c >= 0x80;
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            for c in 0..=255u8 {
                // SAFETY: the CPU has AVX2.
                let hit = unsafe {
                    use std::arch::x86_64::{_mm256_movemask_epi8, _mm256_set1_epi8};
                    _mm256_movemask_epi8(avx2::maybe(_mm256_set1_epi8(c as i8)))
                };
                assert_eq!(hit != 0, flagged(c), "avx2 {c:#04x}");
            }
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512bw") {
            for c in 0..=255u8 {
                // SAFETY: the CPU has AVX-512BW.
                let hit = unsafe { avx512::maybe(std::arch::x86_64::_mm512_set1_epi8(c as i8)) };
                assert_eq!(hit != 0, flagged(c), "avx512 {c:#04x}");
            }
        }
    }

    #[test]
    fn long_plain_runs_end_at_the_text() {
        let b = vec![b'A'; 1000];
        assert_eq!(
            plain_run(&b, 3),
            Run {
                end: 1000,
                non_ascii: false
            }
        );
        assert_eq!(
            plain_run(&b, 1000),
            Run {
                end: 1000,
                non_ascii: false
            }
        );
        let mut b = b;
        b[700] = 0xC3;
        b[999] = b'"';
        assert_eq!(
            plain_run(&b, 0),
            Run {
                end: 999,
                non_ascii: true
            }
        );
        assert_eq!(
            plain_run(&b, 701),
            Run {
                end: 999,
                non_ascii: false
            }
        );
    }
}
