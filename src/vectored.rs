//! Writing with as few system calls as it takes, for both HTTP/1.1 sides (to clients,
//! [`crate::http1`]; to upstreams, [`crate::upstream`]): a [`Gather`] copies small pieces
//! (heads, small body frames) together and keeps large ones by reference; one buffer is
//! written with a plain write (`send(2)` on a socket), several with one vectored write
//! (`writev(2)`) when the socket takes them all.
//!
//! On Linux, `writev` on a TCP socket takes the file-system write path (`vfs_writev`) before
//! the socket's, and costs the kernel about 0.2 µs more per call than `send` with the same
//! bytes (BENCHMARKS.md, item 47): a 2 KB request and its response go out with one `send`
//! each.

use std::io::IoSlice;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Up to this many buffers are described on the stack; more take an allocation.
const INLINE: usize = 16;
/// Pieces up to this size are copied into the gathering buffer; larger ones are written
/// from where they are.
const COPY_MAX: usize = 16 << 10;
/// A gathering buffer that took more than this between two writes is let go after the
/// write, so that a connection (an idle pooled one too) keeps at most this much.
const KEEP: usize = 64 << 10;

/// Bytes waiting to be written: small pieces copied together, large ones by reference. Its
/// buffer is kept from one write to the next, unless it grew past [`KEEP`].
#[derive(Default)]
pub(crate) struct Gather {
    pending: Vec<Bytes>,
    scratch: BytesMut,
    /// Bytes gathered since the last write.
    len: usize,
    /// Of them, bytes copied into `scratch`.
    copied: usize,
}

impl Gather {
    /// Adds a copy of `b`.
    pub(crate) fn put(&mut self, b: &[u8]) {
        self.scratch.extend_from_slice(b);
        self.len += b.len();
        self.copied += b.len();
    }

    /// Adds `b`: copied if small, else by reference.
    pub(crate) fn put_bytes(&mut self, b: Bytes) {
        if b.len() <= COPY_MAX {
            self.put(&b);
            return;
        }
        self.seal();
        self.len += b.len();
        self.pending.push(b);
    }

    /// The bytes gathered and not yet written.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The separate buffers a write would take now.
    pub(crate) fn pieces(&self) -> usize {
        self.pending.len() + usize::from(!self.scratch.is_empty())
    }

    fn seal(&mut self) {
        if !self.scratch.is_empty() {
            self.pending.push(self.scratch.split().freeze());
        }
    }

    /// Writes everything gathered.
    pub(crate) async fn flush<W: AsyncWrite + Unpin>(&mut self, io: &mut W) -> std::io::Result<()> {
        self.seal();
        write_all(io, &mut self.pending).await?;
        if self.copied > KEEP {
            self.scratch = BytesMut::new();
        }
        self.len = 0;
        self.copied = 0;
        Ok(())
    }
}

/// Writes every buffer in `bufs`, then empties it.
async fn write_all<W: AsyncWrite + Unpin>(
    io: &mut W,
    bufs: &mut Vec<Bytes>,
) -> std::io::Result<()> {
    if let [one] = &bufs[..] {
        io.write_all(one).await?;
    } else {
        let mut inline = [IoSlice::new(&[]); INLINE];
        let mut spilled = Vec::new();
        let mut left = if bufs.len() <= INLINE {
            for (slot, b) in inline.iter_mut().zip(bufs.iter()) {
                *slot = IoSlice::new(b);
            }
            &mut inline[..bufs.len()]
        } else {
            spilled.extend(bufs.iter().map(|b| IoSlice::new(b)));
            &mut spilled[..]
        };
        while !left.is_empty() {
            let n = io.write_vectored(left).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut left, n);
        }
    }
    bufs.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `step` bytes per call, and counts its plain and vectored
    /// calls.
    #[derive(Default)]
    struct Trickle {
        got: Vec<u8>,
        step: usize,
        plain: usize,
        vectored: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.plain += 1;
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.vectored += 1;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.step - n);
                self.got.extend_from_slice(&b[..take]);
                n += take;
            }
            std::task::Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn every_byte_is_written_in_order_however_few_the_socket_takes() {
        // Each buffer `size` bytes long, so that small and large lists are both written.
        for size in [1, 700] {
            for count in [0, 1, 3, INLINE, INLINE + 5] {
                for step in [1, 7, 1 << 20] {
                    let mut bufs: Vec<Bytes> = (0..count)
                        .map(|i| Bytes::from(format!("<{i}:{}>", "x".repeat(size + i))))
                        .collect();
                    let want: Vec<u8> = bufs.iter().flat_map(|b| b.to_vec()).collect();
                    let mut io = Trickle {
                        step,
                        ..Trickle::default()
                    };
                    write_all(&mut io, &mut bufs).await.unwrap();
                    let what = format!("{count} buffers of {size}+ bytes, {step} bytes a write");
                    assert_eq!(io.got, want, "{what}");
                    assert!(bufs.is_empty());
                    if step == 1 << 20 {
                        let calls = (io.plain, io.vectored);
                        match count {
                            0 => assert_eq!(calls, (0, 0), "{what}"),
                            1 => assert_eq!(calls, (1, 0), "{what}"),
                            _ => assert_eq!(calls, (0, 1), "{what}"),
                        }
                    }
                }
            }
        }
    }

    #[tokio::test]
    async fn small_pieces_go_out_in_one_plain_write_and_large_ones_by_reference() {
        let large = Bytes::from(vec![b'L'; COPY_MAX + 1]);
        let mut out = Gather::default();
        let mut io = Trickle {
            step: usize::MAX,
            ..Trickle::default()
        };
        out.put(b"head\r\n\r\n");
        out.put_bytes(Bytes::from_static(b"small body"));
        assert_eq!((out.len(), out.pieces()), (18, 1));
        out.flush(&mut io).await.unwrap();
        assert_eq!((io.plain, io.vectored, out.len()), (1, 0, 0));
        assert_eq!(io.got, b"head\r\n\r\nsmall body");

        io.got.clear();
        out.put(b"a");
        out.put_bytes(large.clone());
        out.put(b"z");
        assert_eq!(out.pieces(), 3);
        out.flush(&mut io).await.unwrap();
        assert_eq!((io.plain, io.vectored, out.pieces()), (1, 1, 0));
        assert_eq!(io.got.len(), large.len() + 2);
        assert!(io.got.starts_with(b"aL") && io.got.ends_with(b"Lz"));
    }

    #[tokio::test]
    async fn a_buffer_that_grew_large_is_let_go_after_its_write() {
        let mut out = Gather::default();
        let mut io = Trickle {
            step: usize::MAX,
            ..Trickle::default()
        };
        let pieces = KEEP / COPY_MAX + 1;
        for _ in 0..pieces {
            out.put_bytes(Bytes::from(vec![b'x'; COPY_MAX]));
        }
        out.flush(&mut io).await.unwrap();
        assert_eq!(io.got.len(), pieces * COPY_MAX);
        // What the next request gathers starts in a small buffer, not in what is left of
        // the large one.
        out.put(b"a small head");
        assert!(
            out.scratch.capacity() < COPY_MAX,
            "{}",
            out.scratch.capacity()
        );
    }
}
