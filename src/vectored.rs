//! Writing a list of buffers with as few system calls as it takes, for both HTTP/1.1 sides
//! (to clients, [`crate::http1`]; to upstreams, [`crate::upstream`]): buffers of a few KiB in
//! all are copied into one and written with a plain write (`send(2)` on a socket), larger
//! ones with one vectored write (`writev(2)`) when the socket takes them all.
//!
//! On Linux, `writev` on a TCP socket takes the file-system write path (`vfs_writev`) before
//! the socket's, and costs the kernel about 0.2 µs more per call than `send` with the same
//! bytes (BENCHMARKS.md, item 47); copying 8 KiB costs less than that.

use std::io::IoSlice;

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Up to this many buffers are described on the stack; more take an allocation.
const INLINE: usize = 16;
/// Buffers of at most this many bytes in all are copied into one and written plainly.
const COALESCE: usize = 8 << 10;

/// Writes every buffer in `bufs`, then empties it.
pub(crate) async fn write_all<W: AsyncWrite + Unpin>(
    io: &mut W,
    bufs: &mut Vec<Bytes>,
) -> std::io::Result<()> {
    let total: usize = bufs.iter().map(Bytes::len).sum();
    if let [one] = &bufs[..] {
        io.write_all(one).await?;
    } else if total <= COALESCE {
        let mut joined = Vec::with_capacity(total);
        for b in bufs.iter() {
            joined.extend_from_slice(b);
        }
        io.write_all(&joined).await?;
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
                        match (count, want.len() <= COALESCE) {
                            (0, _) => assert_eq!(calls, (0, 0), "{what}"),
                            (1, _) | (_, true) => assert_eq!(calls, (1, 0), "{what}"),
                            (_, false) => assert_eq!(calls, (0, 1), "{what}"),
                        }
                    }
                }
            }
        }
    }
}
