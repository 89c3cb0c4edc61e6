//! A compact, deterministic binary encoding for the `jmt` storage types, built on `serde`.
//!
//! The `jmt` node types (`NodeKey`, `Node`) are opaque: several of their fields are private, so
//! they can only be persisted through the serialization traits they derive (`serde` and `borsh`).
//! This module is a small non-self-describing `serde` format, similar in spirit to bincode:
//!
//! - integers are fixed width, **big-endian** (so encoded `NodeKey`s sort by version first);
//! - `usize` is written as `u64`; `bool` and `Option` tags are one byte (0 or 1);
//! - sequences, strings, byte strings and maps carry a `u64` length prefix;
//! - tuples, arrays and structs are their fields in declaration order, without a length;
//! - enum variants are a `u32` variant index followed by the variant's content;
//! - floats are refused (state never contains floats).
//!
//! The encoding only affects how nodes are laid out on disk, never a root hash: the app hash is
//! computed by `jmt` from the node contents, not from these bytes.

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde::ser::{self, Serialize};

/// An encoding or decoding failure.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// A type the format deliberately does not support, or a serde-reported failure.
    #[error("{0}")]
    Message(String),
    /// The input ended before the value was complete.
    #[error("unexpected end of input: needed {needed} more bytes at offset {offset}")]
    UnexpectedEnd {
        /// Bytes that were still needed.
        needed: usize,
        /// Offset in the input where reading stopped.
        offset: usize,
    },
    /// The value was complete but input bytes were left over.
    #[error("{0} trailing bytes after the encoded value")]
    TrailingBytes(usize),
}

impl ser::Error for CodecError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        CodecError::Message(msg.to_string())
    }
}

impl de::Error for CodecError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        CodecError::Message(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, CodecError>;

/// Encodes `value` into a fresh byte vector.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    value.serialize(&mut Encoder { out: &mut out })?;
    Ok(out)
}

/// Decodes a value of type `T` that must span all of `bytes`.
pub fn decode<'de, T: de::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T> {
    let mut decoder = Decoder {
        input: bytes,
        offset: 0,
    };
    let value = T::deserialize(&mut decoder)?;
    if !decoder.input.is_empty() {
        return Err(CodecError::TrailingBytes(decoder.input.len()));
    }
    Ok(value)
}

fn unsupported<T>(what: &str) -> Result<T> {
    Err(CodecError::Message(format!(
        "the store codec does not support {what}"
    )))
}

struct Encoder<'a> {
    out: &'a mut Vec<u8>,
}

impl Encoder<'_> {
    fn len(&mut self, len: usize) {
        self.out.extend_from_slice(&(len as u64).to_be_bytes());
    }

    fn variant(&mut self, index: u32) {
        self.out.extend_from_slice(&index.to_be_bytes());
    }
}

impl ser::Serializer for &mut Encoder<'_> {
    type Ok = ();
    type Error = CodecError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn is_human_readable(&self) -> bool {
        false
    }

    fn serialize_bool(self, v: bool) -> Result<()> {
        self.out.push(u8::from(v));
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<()> {
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i16(self, v: i16) -> Result<()> {
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i32(self, v: i32) -> Result<()> {
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i64(self, v: i64) -> Result<()> {
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> Result<()> {
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<()> {
        self.out.push(v);
        Ok(())
    }
    fn serialize_u16(self, v: u16) -> Result<()> {
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<()> {
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_u64(self, v: u64) -> Result<()> {
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> Result<()> {
        self.out.extend_from_slice(&v.to_be_bytes());
        Ok(())
    }
    fn serialize_f32(self, _v: f32) -> Result<()> {
        unsupported("floats")
    }
    fn serialize_f64(self, _v: f64) -> Result<()> {
        unsupported("floats")
    }
    fn serialize_char(self, v: char) -> Result<()> {
        self.serialize_u32(u32::from(v))
    }
    fn serialize_str(self, v: &str) -> Result<()> {
        self.serialize_bytes(v.as_bytes())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<()> {
        self.len(v.len());
        self.out.extend_from_slice(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<()> {
        self.out.push(0);
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        self.out.push(1);
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<()> {
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<()> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        variant_index: u32,
        _variant: &'static str,
    ) -> Result<()> {
        self.variant(variant_index);
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        variant_index: u32,
        _variant: &'static str,
        value: &T,
    ) -> Result<()> {
        self.variant(variant_index);
        value.serialize(self)
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self> {
        match len {
            Some(len) => {
                self.len(len);
                Ok(self)
            }
            None => unsupported("sequences of unknown length"),
        }
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self> {
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        variant_index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self> {
        self.variant(variant_index);
        Ok(self)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self> {
        match len {
            Some(len) => {
                self.len(len);
                Ok(self)
            }
            None => unsupported("maps of unknown length"),
        }
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self> {
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        variant_index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self> {
        self.variant(variant_index);
        Ok(self)
    }
}

impl ser::SerializeSeq for &mut Encoder<'_> {
    type Ok = ();
    type Error = CodecError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeTuple for &mut Encoder<'_> {
    type Ok = ();
    type Error = CodecError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for &mut Encoder<'_> {
    type Ok = ();
    type Error = CodecError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for &mut Encoder<'_> {
    type Ok = ();
    type Error = CodecError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeMap for &mut Encoder<'_> {
    type Ok = ();
    type Error = CodecError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        key.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeStruct for &mut Encoder<'_> {
    type Ok = ();
    type Error = CodecError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _key: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut Encoder<'_> {
    type Ok = ();
    type Error = CodecError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        _key: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}

struct Decoder<'de> {
    input: &'de [u8],
    offset: usize,
}

impl<'de> Decoder<'de> {
    fn take(&mut self, n: usize) -> Result<&'de [u8]> {
        if self.input.len() < n {
            return Err(CodecError::UnexpectedEnd {
                needed: n - self.input.len(),
                offset: self.offset,
            });
        }
        let (head, tail) = self.input.split_at(n);
        self.input = tail;
        self.offset += n;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn len(&mut self) -> Result<usize> {
        let len = u64::from_be_bytes(self.array()?);
        let len = usize::try_from(len)
            .map_err(|_| CodecError::Message(format!("length {len} does not fit in usize")))?;
        // Every element takes at least zero bytes, so a length can't be checked against the
        // remaining input in general; byte strings are checked in `take`.
        Ok(len)
    }

    fn tag(&mut self) -> Result<bool> {
        match self.take(1)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(CodecError::Message(format!(
                "expected a 0 or 1 tag byte at offset {}, found {other}",
                self.offset - 1
            ))),
        }
    }
}

macro_rules! decode_int {
    ($method:ident, $visit:ident, $ty:ty) => {
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
            visitor.$visit(<$ty>::from_be_bytes(self.array()?))
        }
    };
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'de> {
    type Error = CodecError;

    fn is_human_readable(&self) -> bool {
        false
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        unsupported("self-describing decoding (deserialize_any)")
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_bool(self.tag()?)
    }

    decode_int!(deserialize_i8, visit_i8, i8);
    decode_int!(deserialize_i16, visit_i16, i16);
    decode_int!(deserialize_i32, visit_i32, i32);
    decode_int!(deserialize_i64, visit_i64, i64);
    decode_int!(deserialize_i128, visit_i128, i128);
    decode_int!(deserialize_u8, visit_u8, u8);
    decode_int!(deserialize_u16, visit_u16, u16);
    decode_int!(deserialize_u32, visit_u32, u32);
    decode_int!(deserialize_u64, visit_u64, u64);
    decode_int!(deserialize_u128, visit_u128, u128);

    fn deserialize_f32<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        unsupported("floats")
    }
    fn deserialize_f64<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        unsupported("floats")
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let code = u32::from_be_bytes(self.array()?);
        let c = char::from_u32(code)
            .ok_or_else(|| CodecError::Message(format!("{code:#x} is not a valid char")))?;
        visitor.visit_char(c)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let len = self.len()?;
        let bytes = self.take(len)?;
        let s = std::str::from_utf8(bytes)
            .map_err(|e| CodecError::Message(format!("invalid UTF-8 string: {e}")))?;
        visitor.visit_borrowed_str(s)
    }
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let len = self.len()?;
        visitor.visit_borrowed_bytes(self.take(len)?)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        if self.tag()? {
            visitor.visit_some(self)
        } else {
            visitor.visit_none()
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let len = self.len()?;
        visitor.visit_seq(Fields {
            decoder: self,
            remaining: len,
        })
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value> {
        visitor.visit_seq(Fields {
            decoder: self,
            remaining: len,
        })
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_tuple(len, visitor)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let len = self.len()?;
        visitor.visit_map(Fields {
            decoder: self,
            remaining: len,
        })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_tuple(fields.len(), visitor)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_enum(self)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        unsupported("identifiers outside enum variants")
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value> {
        unsupported("skipping unknown values")
    }
}

/// Sequence, tuple, struct and map access: a known number of consecutive elements.
struct Fields<'a, 'de> {
    decoder: &'a mut Decoder<'de>,
    remaining: usize,
}

impl<'de> de::SeqAccess<'de> for Fields<'_, 'de> {
    type Error = CodecError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.remaining == 0 {
            return Ok(None);
        }
        self.remaining -= 1;
        seed.deserialize(&mut *self.decoder).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        // Capped so a corrupt length can't make a visitor pre-allocate absurdly.
        Some(self.remaining.min(4096))
    }
}

impl<'de> de::MapAccess<'de> for Fields<'_, 'de> {
    type Error = CodecError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.remaining == 0 {
            return Ok(None);
        }
        self.remaining -= 1;
        seed.deserialize(&mut *self.decoder).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(&mut *self.decoder)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.remaining.min(4096))
    }
}

impl<'de> de::EnumAccess<'de> for &mut Decoder<'de> {
    type Error = CodecError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self)> {
        let index = u32::from_be_bytes(self.array()?);
        let value = seed.deserialize(IntoDeserializer::<CodecError>::into_deserializer(index))?;
        Ok((value, self))
    }
}

impl<'de> de::VariantAccess<'de> for &mut Decoder<'de> {
    type Error = CodecError;

    fn unit_variant(self) -> Result<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value> {
        de::Deserializer::deserialize_tuple(self, len, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        de::Deserializer::deserialize_tuple(self, fields.len(), visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Shape {
        Empty,
        Wrapped(u64),
        Pair(u8, i32),
        Named { count: usize, tag: Option<u16> },
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Sample {
        flag: bool,
        hash: [u8; 32],
        bytes: Vec<u8>,
        name: String,
        shapes: Vec<Shape>,
        boxed: Box<[Option<u32>; 4]>,
        map: BTreeMap<u8, i64>,
    }

    fn sample() -> Sample {
        Sample {
            flag: true,
            hash: [7; 32],
            bytes: vec![1, 2, 3],
            name: "gonka".to_string(),
            shapes: vec![
                Shape::Empty,
                Shape::Wrapped(u64::MAX),
                Shape::Pair(9, -5),
                Shape::Named {
                    count: 3,
                    tag: Some(2),
                },
                Shape::Named {
                    count: 0,
                    tag: None,
                },
            ],
            boxed: Box::new([Some(1), None, Some(3), None]),
            map: BTreeMap::from([(1, -1), (2, 2)]),
        }
    }

    #[test]
    fn round_trips_every_supported_shape() {
        let value = sample();
        let bytes = encode(&value).unwrap();
        let back: Sample = decode(&bytes).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn integers_are_big_endian_so_keys_sort_numerically() {
        assert_eq!(encode(&0x0102u16).unwrap(), vec![1, 2]);
        let a = encode(&(1u64, 255u8)).unwrap();
        let b = encode(&(256u64, 0u8)).unwrap();
        assert!(a < b);
    }

    #[test]
    fn rejects_truncated_trailing_and_float_input() {
        let bytes = encode(&sample()).unwrap();
        assert!(matches!(
            decode::<Sample>(&bytes[..bytes.len() - 1]),
            Err(CodecError::UnexpectedEnd { .. })
        ));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            decode::<Sample>(&longer),
            Err(CodecError::TrailingBytes(1))
        ));
        assert!(encode(&1.5f64).is_err());
        assert!(decode::<bool>(&[2]).is_err());
    }
}
