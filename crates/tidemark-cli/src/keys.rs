//! Keys and values on the command line: as given (UTF-8 text), or as hex
//! with `--hex`, for the binary keys programs write (big-endian integers,
//! composite keys) that no shell argument can hold.

/// The bytes of a KEY, VALUE or bound argument; `what` names it in the
/// error for a malformed hex string.
pub(crate) fn decode(arg: &str, hex: bool, what: &str) -> Result<Vec<u8>, String> {
    if !hex {
        return Ok(arg.as_bytes().to_vec());
    }
    hex::decode(arg).map_err(|e| format!("{what} {arg:?} is not hex: {e}"))
}

/// Writes `bytes` as given, or as lowercase hex.
pub(crate) fn write(out: &mut impl std::io::Write, bytes: &[u8], hex: bool) -> std::io::Result<()> {
    if hex {
        out.write_all(hex::encode(bytes).as_bytes())
    } else {
        out.write_all(bytes)
    }
}

/// The bytes of `path` (`-`: standard input) as a value. Reads at most one
/// byte past [`tidemark::MAX_VALUE_SIZE`], so that a larger input is refused
/// by the engine's own check without being read whole.
pub(crate) fn read_value(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let limit = tidemark::MAX_VALUE_SIZE as u64 + 1;
    let mut v = Vec::new();
    let r = if path.as_os_str() == "-" {
        std::io::stdin().lock().take(limit).read_to_end(&mut v)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut v))
    };
    r.map_err(|e| format!("--value-file {}: {e}", path.display()))?;
    Ok(v)
}

/// The smallest key above every key that starts with `prefix`, or `None`
/// when there is none (the prefix is empty or all 0xff): the exclusive end
/// of a prefix scan.
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_arguments_decode_and_bad_ones_name_the_argument() {
        assert_eq!(decode("00ff10", true, "KEY").unwrap(), vec![0, 0xff, 0x10]);
        assert_eq!(decode("00FF", true, "KEY").unwrap(), vec![0, 0xff]);
        assert_eq!(decode("00ff", false, "KEY").unwrap(), b"00ff".to_vec());
        let e = decode("0g", true, "VALUE").unwrap_err();
        assert!(e.starts_with("VALUE \"0g\" is not hex"), "{e}");
        assert!(decode("abc", true, "KEY").is_err(), "odd length");
    }

    #[test]
    fn written_bytes_are_raw_or_hex() {
        let mut v = Vec::new();
        write(&mut v, &[0, 0xab, b'\t'], true).unwrap();
        assert_eq!(v, b"00ab09");
        v.clear();
        write(&mut v, b"a\tb", false).unwrap();
        assert_eq!(v, b"a\tb");
    }

    #[test]
    fn prefix_end_is_the_next_key_after_the_prefix() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff, 0xff]), None);
        assert_eq!(prefix_end(b""), None);
        // Every key with the prefix sorts below the end, and the end itself
        // does not have the prefix.
        for p in [&b"ab"[..], &[1, 0xff], &[0, 0xfe, 0xff]] {
            let end = prefix_end(p).unwrap();
            let mut with = p.to_vec();
            with.extend_from_slice(&[0xff; 8]);
            assert!(with.as_slice() < end.as_slice());
            assert!(!end.starts_with(p));
        }
    }
}
