//! `_id` keys: BSON values encoded so that byte order is MongoDB's
//! comparison order (type class first, then value) for the types that
//! order meaningfully, and equal values encode equally (the int 1 and the
//! double 1.0 are one key).
//!
//! ```text
//! MinKey 0x01 | Null 0x05 | numbers 0x0A f64-sortable [i64 when beyond 2^53]
//! Decimal128 0x0B raw | String/Symbol 0x0F escaped | Document 0x14 fields 0x00
//! Binary 0x1E len u32 subtype bytes | ObjectId 0x23 12 bytes
//! Boolean 0x28 | DateTime 0x2D i64-sortable | Timestamp 0x2F time inc
//! other 0x60 type raw | MaxKey 0x7F
//! ```
//! Escaped strings turn each 0x00 into 0x00 0xFF and end with 0x00 0x00,
//! so a string never is a prefix of a longer one's encoding.

use bson::Bson;

use crate::error::{Error, Result};

fn f64_sortable(v: f64) -> [u8; 8] {
    let v = if v.is_nan() { f64::NAN } else { v + 0.0 };
    let bits = v.to_bits();
    let s = if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    };
    s.to_be_bytes()
}

fn i64_sortable(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

fn escaped(out: &mut Vec<u8>, s: &[u8]) {
    for &b in s {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

const EXACT: i64 = 1 << 53;

fn int(out: &mut Vec<u8>, v: i64) {
    out.push(0x0A);
    out.extend_from_slice(&f64_sortable(v as f64));
    if !(-EXACT..=EXACT).contains(&v) {
        out.extend_from_slice(&i64_sortable(v));
    }
}

fn encode(out: &mut Vec<u8>, v: &Bson) -> Result<()> {
    match v {
        Bson::MinKey => out.push(0x01),
        Bson::Null | Bson::Undefined => out.push(0x05),
        Bson::Int32(i) => int(out, i64::from(*i)),
        Bson::Int64(i) => int(out, *i),
        Bson::Double(d) => {
            if d.fract() == 0.0 && d.abs() <= EXACT as f64 {
                int(out, *d as i64)
            } else {
                out.push(0x0A);
                out.extend_from_slice(&f64_sortable(*d));
            }
        }
        Bson::Decimal128(d) => {
            out.push(0x0B);
            out.extend_from_slice(&d.bytes());
        }
        Bson::String(s) | Bson::Symbol(s) => {
            out.push(0x0F);
            escaped(out, s.as_bytes());
        }
        Bson::Document(d) => {
            out.push(0x14);
            for (k, v) in d {
                escaped(out, k.as_bytes());
                encode(out, v)?;
            }
            out.push(0);
        }
        Bson::Array(_) => return Err(Error::InvalidBson("_id cannot be an array".into())),
        Bson::Binary(b) => {
            out.push(0x1E);
            out.extend_from_slice(&(b.bytes.len() as u32).to_be_bytes());
            out.push(u8::from(b.subtype));
            out.extend_from_slice(&b.bytes);
        }
        Bson::ObjectId(o) => {
            out.push(0x23);
            out.extend_from_slice(&o.bytes());
        }
        Bson::Boolean(b) => out.extend_from_slice(&[0x28, u8::from(*b)]),
        Bson::DateTime(t) => {
            out.push(0x2D);
            out.extend_from_slice(&i64_sortable(t.timestamp_millis()));
        }
        Bson::Timestamp(t) => {
            out.push(0x2F);
            out.extend_from_slice(&t.time.to_be_bytes());
            out.extend_from_slice(&t.increment.to_be_bytes());
        }
        Bson::MaxKey => out.push(0x7F),
        other => {
            out.push(0x60);
            out.push(other.element_type() as u8);
            let mut d = bson::Document::new();
            d.insert("", other.clone());
            d.to_writer(&mut *out)
                .map_err(|e| Error::InvalidBson(e.to_string()))?;
        }
    }
    Ok(())
}

/// The index key of `_id` value `v`.
pub(crate) fn key_of(v: &Bson) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(16);
    encode(&mut out, v)?;
    crate::db::check_key(&out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;
    use proptest::prelude::*;

    #[test]
    fn equal_numbers_are_one_key() {
        assert_eq!(
            key_of(&Bson::Int32(1)).ok(),
            key_of(&Bson::Double(1.0)).ok()
        );
        assert_eq!(key_of(&Bson::Int64(7)).ok(), key_of(&Bson::Int32(7)).ok());
        assert_ne!(
            key_of(&Bson::Int64(7)).ok(),
            key_of(&Bson::String("7".into())).ok()
        );
    }

    #[test]
    fn arrays_are_refused() {
        assert!(matches!(
            key_of(&Bson::Array(vec![])),
            Err(Error::InvalidBson(_))
        ));
    }

    #[test]
    fn classes_order_like_mongodb() {
        let order = [
            Bson::MinKey,
            Bson::Null,
            Bson::Int32(-5),
            Bson::Double(2.5),
            Bson::Int64(1 << 60),
            Bson::String("a".into()),
            Bson::String("a\0b".into()),
            Bson::String("ab".into()),
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::ObjectId(ObjectId::from_bytes([1; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::MaxKey,
        ];
        let keys: Vec<_> = order.iter().map(|v| key_of(v).unwrap()).collect();
        for w in keys.windows(2) {
            assert!(w[0] < w[1], "{w:?}");
        }
    }

    proptest! {
        #[test]
        fn numbers_order_by_value(a in any::<i64>(), b in any::<i64>()) {
            let (ka, kb) = (key_of(&Bson::Int64(a)).unwrap(), key_of(&Bson::Int64(b)).unwrap());
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn doubles_order_by_value(a in -1e300f64..1e300, b in -1e300f64..1e300) {
            let (ka, kb) = (key_of(&Bson::Double(a)).unwrap(), key_of(&Bson::Double(b)).unwrap());
            prop_assert_eq!(a.partial_cmp(&b).unwrap(), ka.cmp(&kb));
        }

        #[test]
        fn strings_order_by_bytes(a in ".{0,12}", b in ".{0,12}") {
            let (ka, kb) = (key_of(&Bson::String(a.clone())).unwrap(), key_of(&Bson::String(b.clone())).unwrap());
            prop_assert_eq!(a.as_bytes().cmp(b.as_bytes()), ka.cmp(&kb));
        }
    }
}
