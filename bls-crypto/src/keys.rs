//! Individual keys, signatures, proofs of possession and same-message aggregation.

use blstrs_plus::elliptic_curve::hash2curve::ExpandMsgXmd;
use blstrs_plus::ff::Field;
use blstrs_plus::group::prime::PrimeCurveAffine;
use blstrs_plus::group::{Curve, Group};
use blstrs_plus::pairing_lib::MillerLoopResult as _;
use blstrs_plus::{
    multi_miller_loop, G1Affine, G1Projective, G2Affine, G2Prepared, G2Projective, Scalar,
};
use sha2::Sha256;

/// Domain separation tag of message signatures (the IETF `_POP_` ciphersuite).
pub const SIG_DST: &[u8] = b"BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";
/// Domain separation tag of proofs of possession.
pub const POP_DST: &[u8] = b"BLS_POP_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";
/// Bytes of a compressed public key (G1).
pub const PUBLIC_KEY_LEN: usize = 48;
/// Bytes of a compressed signature (G2).
pub const SIGNATURE_LEN: usize = 96;
/// Bytes of a secret key (a big-endian scalar).
pub const SECRET_KEY_LEN: usize = 32;

/// Domain of [`SecretKey::from_seed`].
const KEYGEN_DST: &[u8] = b"gonka/bls-keygen/v1";

/// A secret key: a non-zero scalar. `Debug` never prints it.
#[derive(Clone)]
pub struct SecretKey(pub(crate) Scalar);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

impl SecretKey {
    /// The key derived from 32 bytes of seed (hashed to a scalar with `gonka/bls-keygen/v1`;
    /// a zero scalar, which no seed is known to hash to, is replaced by one).
    pub fn from_seed(seed: &[u8; 32]) -> SecretKey {
        let scalar = Scalar::hash::<ExpandMsgXmd<Sha256>>(seed, KEYGEN_DST);
        SecretKey(if scalar.is_zero().into() {
            Scalar::ONE
        } else {
            scalar
        })
    }

    /// The key of a big-endian scalar; `None` if it is zero or not below the group order.
    pub fn from_bytes(bytes: &[u8; SECRET_KEY_LEN]) -> Option<SecretKey> {
        Option::<Scalar>::from(Scalar::from_be_bytes(bytes))
            .filter(|s| !bool::from(s.is_zero()))
            .map(SecretKey)
    }

    /// The big-endian scalar.
    pub fn to_bytes(&self) -> [u8; SECRET_KEY_LEN] {
        self.0.to_be_bytes()
    }

    /// Its public key, `sk·g1`.
    pub fn public_key(&self) -> PublicKey {
        PublicKey((G1Projective::generator() * self.0).to_affine())
    }

    /// Signs `msg` ([`SIG_DST`]).
    pub fn sign(&self, msg: &[u8]) -> Signature {
        Signature((hash(msg, SIG_DST) * self.0).to_affine())
    }

    /// A proof of possession over `msg` ([`POP_DST`]).
    pub fn prove_possession(&self, msg: &[u8]) -> Signature {
        Signature((hash(msg, POP_DST) * self.0).to_affine())
    }
}

/// A public key: a G1 point of the prime-order subgroup, not the identity.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PublicKey(pub(crate) G1Affine);

impl PublicKey {
    /// Its 48-byte compressed form.
    pub fn to_bytes(&self) -> [u8; PUBLIC_KEY_LEN] {
        self.0.to_compressed()
    }

    /// Decodes 48 compressed bytes; `None` unless they are a subgroup point other than the
    /// identity.
    pub fn from_bytes(bytes: &[u8]) -> Option<PublicKey> {
        let bytes: &[u8; PUBLIC_KEY_LEN] = bytes.try_into().ok()?;
        Option::<G1Affine>::from(G1Affine::from_compressed(bytes))
            .filter(|p| !bool::from(p.is_identity()))
            .map(PublicKey)
    }

    /// Whether `sig` signs `msg` under this key ([`SIG_DST`]).
    pub fn verify(&self, msg: &[u8], sig: &Signature) -> bool {
        pairing_check(&self.0, msg, SIG_DST, &sig.0)
    }

    /// Whether `proof` is this key's proof of possession over `msg` ([`POP_DST`]).
    pub fn verify_possession(&self, msg: &[u8], proof: &Signature) -> bool {
        pairing_check(&self.0, msg, POP_DST, &proof.0)
    }
}

/// A signature: a G2 point of the prime-order subgroup.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Signature(pub(crate) G2Affine);

impl Signature {
    /// Its 96-byte compressed form.
    pub fn to_bytes(&self) -> [u8; SIGNATURE_LEN] {
        self.0.to_compressed()
    }

    /// Decodes 96 compressed bytes; `None` unless they are a subgroup point.
    pub fn from_bytes(bytes: &[u8]) -> Option<Signature> {
        let bytes: &[u8; SIGNATURE_LEN] = bytes.try_into().ok()?;
        Option::<G2Affine>::from(G2Affine::from_compressed(bytes)).map(Signature)
    }
}

/// The sum of `signatures` (same message, or not: the verifier decides).
pub fn aggregate(signatures: &[Signature]) -> Signature {
    let sum: G2Projective = signatures.iter().map(|s| G2Projective::from(s.0)).sum();
    Signature(sum.to_affine())
}

/// Whether `signature` is the aggregate of signatures over one `msg` by every key of
/// `keys` (the keys' proofs of possession must have been checked: that is what makes
/// summing them safe). `false` for no key.
pub fn fast_aggregate_verify(keys: &[PublicKey], msg: &[u8], signature: &Signature) -> bool {
    if keys.is_empty() {
        return false;
    }
    let sum: G1Projective = keys.iter().map(|k| G1Projective::from(k.0)).sum();
    pairing_check(&sum.to_affine(), msg, SIG_DST, &signature.0)
}

/// `msg` hashed to G2 under `dst` (hash_to_curve, XMD:SHA-256, SSWU, random oracle).
pub(crate) fn hash(msg: &[u8], dst: &[u8]) -> G2Projective {
    G2Projective::hash::<ExpandMsgXmd<Sha256>>(msg, dst)
}

/// `e(key, H(msg)) = e(g1, sig)`, as one product of two Miller loops and one final
/// exponentiation.
pub(crate) fn pairing_check(key: &G1Affine, msg: &[u8], dst: &[u8], sig: &G2Affine) -> bool {
    let hashed = G2Prepared::from(hash(msg, dst).to_affine());
    let sig = G2Prepared::from(*sig);
    let minus_g1 = (-G1Projective::generator()).to_affine();
    multi_miller_loop(&[(key, &hashed), (&minus_g1, &sig)])
        .final_exponentiation()
        .is_identity()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> SecretKey {
        SecretKey::from_seed(&[n; 32])
    }

    #[test]
    fn signatures_verify_only_for_their_key_message_and_domain() {
        let (a, b) = (key(1), key(2));
        let sig = a.sign(b"hello");
        assert!(a.public_key().verify(b"hello", &sig));
        assert!(!a.public_key().verify(b"hellp", &sig), "another message");
        assert!(!b.public_key().verify(b"hello", &sig), "another key");
        assert!(
            !a.public_key().verify_possession(b"hello", &sig),
            "a signature is not a proof of possession"
        );
        let pop = a.prove_possession(b"hello");
        assert!(a.public_key().verify_possession(b"hello", &pop));
        assert!(!a.public_key().verify(b"hello", &pop), "nor the reverse");
        // Deterministic: the same key signs the same message the same way.
        assert_eq!(sig, key(1).sign(b"hello"));
    }

    #[test]
    fn encodings_round_trip_and_refuse_bad_bytes() {
        let sk = key(3);
        let pk = sk.public_key();
        assert_eq!(PublicKey::from_bytes(&pk.to_bytes()), Some(pk));
        let sig = sk.sign(b"m");
        assert_eq!(Signature::from_bytes(&sig.to_bytes()), Some(sig));
        assert_eq!(
            SecretKey::from_bytes(&sk.to_bytes()).unwrap().public_key(),
            pk
        );
        assert!(PublicKey::from_bytes(&[0u8; 48]).is_none(), "not a point");
        assert!(
            PublicKey::from_bytes(&pk.to_bytes()[..47]).is_none(),
            "short"
        );
        let identity = G1Affine::identity().to_compressed();
        assert!(PublicKey::from_bytes(&identity).is_none(), "the identity");
        assert!(Signature::from_bytes(&[0xAB; 96]).is_none());
        assert!(SecretKey::from_bytes(&[0; 32]).is_none(), "zero");
        assert!(
            SecretKey::from_bytes(&[0xFF; 32]).is_none(),
            "above the order"
        );
    }

    #[test]
    fn same_message_aggregates_verify_against_the_summed_keys() {
        let keys: Vec<SecretKey> = (1..=5).map(key).collect();
        let public: Vec<PublicKey> = keys.iter().map(SecretKey::public_key).collect();
        let sigs: Vec<Signature> = keys.iter().map(|k| k.sign(b"block 7")).collect();
        let agg = aggregate(&sigs);
        assert!(fast_aggregate_verify(&public, b"block 7", &agg));
        assert!(
            !fast_aggregate_verify(&public[..4], b"block 7", &agg),
            "a key missing"
        );
        assert!(!fast_aggregate_verify(&public, b"block 8", &agg));
        assert!(!fast_aggregate_verify(&[], b"block 7", &agg));
    }
}

#[cfg(test)]
mod vectors {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The Ethereum consensus-spec BLS vector `sign_case_142f678a8d05fcd1` (the same `_POP_`
    /// ciphersuite): this crate signs byte for byte as the standard does.
    #[test]
    fn signs_as_the_standard_ciphersuite() {
        let sk: [u8; 32] = hex("47b8192d77bf871b62e87859d653922725724a5c031afeabc60bcef5ff665138")
            .try_into()
            .unwrap();
        let sig = SecretKey::from_bytes(&sk).unwrap().sign(&[0u8; 32]);
        assert_eq!(
            sig.to_bytes().to_vec(),
            hex("b23c46be3a001c63ca711f87a005c200cc550b9429d5f4eb38d74322144f1b63926da3388979e5321012fb1a0526bcd100b5ef5fe72628ce4cd5e904aeaa3279527843fae5ca9ca675f4f51ed8f83bbf7155da9ecc9663100a885d5dc6df96d9")
        );
    }
}
