//! Little-endian field access at fixed offsets.
//!
//! The `get_*`/`put_*` functions index directly and so panic when the field lies
//! outside the buffer; callers use them only on buffers whose length they have
//! already checked. `try_get_*` return `None` instead, for offsets read from disk.
//!
//! Reads convert the sub-slice with `try_into` rather than `copy_from_slice`: the
//! latter carries a debug-build overlap check that stops LLVM from vectorising the
//! checksum loops in test builds (4x slower there).

pub(crate) fn get_u16(buf: &[u8], at: usize) -> u16 {
    // The range is exactly 2 bytes long, so the conversion cannot fail.
    u16::from_le_bytes(buf[at..at + 2].try_into().unwrap_or_default())
}

pub(crate) fn get_u32(buf: &[u8], at: usize) -> u32 {
    // The range is exactly 4 bytes long, so the conversion cannot fail.
    u32::from_le_bytes(buf[at..at + 4].try_into().unwrap_or_default())
}

pub(crate) fn get_u64(buf: &[u8], at: usize) -> u64 {
    // The range is exactly 8 bytes long, so the conversion cannot fail.
    u64::from_le_bytes(buf[at..at + 8].try_into().unwrap_or_default())
}

pub(crate) fn put_u16(buf: &mut [u8], at: usize, value: u16) {
    buf[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u64(buf: &mut [u8], at: usize, value: u64) {
    buf[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

pub(crate) fn try_get_u16(buf: &[u8], at: usize) -> Option<u16> {
    let bytes = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([bytes[0], bytes[1]]))
}

/// True when every byte is zero; word-at-a-time so scanning a 32 KiB page is cheap.
pub(crate) fn is_all_zero(buf: &[u8]) -> bool {
    let mut words = buf.chunks_exact(64);
    let whole = words.by_ref().all(|chunk| {
        let mut acc = 0u64;
        for word in chunk.chunks_exact(8) {
            acc |= get_u64(word, 0);
        }
        acc == 0
    });
    whole && words.remainder().iter().all(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_detection_sees_every_byte() {
        for len in [0usize, 1, 7, 63, 64, 65, 4096] {
            let mut buf = vec![0u8; len];
            assert!(is_all_zero(&buf));
            for i in 0..len {
                buf[i] = 1;
                assert!(!is_all_zero(&buf), "len {len} byte {i}");
                buf[i] = 0;
            }
        }
    }

    #[test]
    fn round_trips() {
        let mut buf = [0u8; 16];
        put_u16(&mut buf, 1, 0xBEEF);
        put_u32(&mut buf, 3, 0xDEAD_BEEF);
        put_u64(&mut buf, 8, 0x0123_4567_89AB_CDEF);
        assert_eq!(get_u16(&buf, 1), 0xBEEF);
        assert_eq!(get_u32(&buf, 3), 0xDEAD_BEEF);
        assert_eq!(get_u64(&buf, 8), 0x0123_4567_89AB_CDEF);
        assert_eq!(buf[8], 0xEF);
        assert_eq!(try_get_u16(&buf, 15), None);
        assert_eq!(try_get_u16(&buf, usize::MAX), None);
        assert_eq!(try_get_u16(&buf, 1), Some(0xBEEF));
    }
}
