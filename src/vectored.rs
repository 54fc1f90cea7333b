//! Writing a list of buffers with as few system calls as it takes: one vectored write
//! when the socket takes them all, for both HTTP/1.1 sides (to clients, [`crate::http1`];
//! to upstreams, [`crate::upstream`]).

use std::io::IoSlice;

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Up to this many buffers are described on the stack; more take an allocation.
const INLINE: usize = 16;

/// Writes every buffer in `bufs`, then empties it.
pub(crate) async fn write_all<W: AsyncWrite + Unpin>(
    io: &mut W,
    bufs: &mut Vec<Bytes>,
) -> std::io::Result<()> {
    {
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

    /// A writer that takes at most `step` bytes per call.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
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
        for count in [0, 1, 3, INLINE, INLINE + 5] {
            for step in [1, 7, 1 << 20] {
                let mut bufs: Vec<Bytes> = (0..count)
                    .map(|i| Bytes::from(format!("<{i}:{}>", "x".repeat(i))))
                    .collect();
                let want: Vec<u8> = bufs.iter().flat_map(|b| b.to_vec()).collect();
                let mut io = Trickle {
                    got: Vec::new(),
                    step,
                };
                write_all(&mut io, &mut bufs).await.unwrap();
                assert_eq!(io.got, want, "{count} buffers, {step} bytes a write");
                assert!(bufs.is_empty());
            }
        }
    }
}
