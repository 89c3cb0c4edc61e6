//! Encrypting a dealer's shares to their receivers' BLS keys (for a distributed key
//! generation whose dealings travel on chain).
//!
//! A dealing carries one ephemeral G1 point `R = r·g1`. Slot `s` of a receiver whose key is
//! `pk = sk·g1` gets `share ⊕ SHA-256("gonka/dkg-share/v1" ‖ context ‖ s ‖ r·pk)`: the receiver
//! computes the same pad from `sk·R` (Diffie–Hellman in G1). Integrity needs no MAC: the
//! receiver checks the decrypted share against the dealer's Feldman commitments, and a share
//! that fails is what a complaint is about.

use blstrs_plus::elliptic_curve::hash2curve::ExpandMsgXmd;
use blstrs_plus::group::{Curve, Group};
use blstrs_plus::{G1Affine, G1Projective, Scalar};
use sha2::{Digest, Sha256};

use crate::keys::{PublicKey, SecretKey};
use crate::threshold::SecretShare;

/// Domain of the share pads.
const SHARE_DOMAIN: &[u8] = b"gonka/dkg-share/v1";

/// A dealing's ephemeral secret `r` (never stored; `Debug` never prints it).
pub struct Ephemeral(Scalar);

impl std::fmt::Debug for Ephemeral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ephemeral(..)")
    }
}

impl Ephemeral {
    /// The ephemeral secret of 32 bytes of randomness (the dealer's own).
    pub fn from_seed(seed: &[u8; 32]) -> Ephemeral {
        Ephemeral(SecretKey::from_seed(seed).0)
    }

    /// `R = r·g1`, published with the dealing.
    pub fn public(&self) -> PublicKey {
        PublicKey((G1Projective::generator() * self.0).to_affine())
    }

    /// Share `share` encrypted to `receiver` under `context` (the chain, the round and the
    /// dealer: a ciphertext moved to another dealing decrypts to garbage).
    pub fn encrypt(&self, receiver: &PublicKey, share: &SecretShare, context: &[u8]) -> [u8; 32] {
        let shared = (G1Projective::from(receiver.0) * self.0).to_affine();
        xor(share.value_bytes(), pad(context, share.index, &shared))
    }
}

impl Ephemeral {
    /// Reveals the point `r·receiver` the shares to `receiver` were encrypted under, with a
    /// proof that it is `r·receiver` for the `r` of [`Ephemeral::public`] (Chaum–Pedersen:
    /// equal discrete logs of `R` to `g1` and of the point to `receiver`). Whoever holds it
    /// decrypts those shares ([`decrypt_with_shared`]); that is the point of a reveal.
    pub fn reveal(&self, receiver: &PublicKey) -> (SharedPoint, [u8; 64]) {
        let shared = (G1Projective::from(receiver.0) * self.0).to_affine();
        let public = self.public();
        let mut nonce_input = self.0.to_be_bytes().to_vec();
        nonce_input.extend_from_slice(&transcript(&public.0, &receiver.0, &shared, None));
        let k = hash_to_scalar(&nonce_input, DLEQ_NONCE_DOMAIN);
        let a = (G1Projective::generator() * k).to_affine();
        let b = (G1Projective::from(receiver.0) * k).to_affine();
        let c = hash_to_scalar(
            &transcript(&public.0, &receiver.0, &shared, Some((&a, &b))),
            DLEQ_DOMAIN,
        );
        let z = k + c * self.0;
        let mut proof = [0u8; 64];
        proof[..32].copy_from_slice(&c.to_be_bytes());
        proof[32..].copy_from_slice(&z.to_be_bytes());
        (SharedPoint(shared), proof)
    }
}

/// The Diffie–Hellman point of a dealing and one receiver (48 bytes compressed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedPoint(G1Affine);

impl SharedPoint {
    /// Its compressed form.
    pub fn to_bytes(&self) -> [u8; 48] {
        self.0.to_compressed()
    }

    /// Decodes 48 compressed bytes of a subgroup point.
    pub fn from_bytes(bytes: &[u8]) -> Option<SharedPoint> {
        let bytes: &[u8; 48] = bytes.try_into().ok()?;
        Option::<G1Affine>::from(G1Affine::from_compressed(bytes)).map(SharedPoint)
    }

    /// Whether `proof` shows this is `r·receiver` for the `r` with `r·g1 = ephemeral`.
    pub fn verify(&self, ephemeral: &PublicKey, receiver: &PublicKey, proof: &[u8; 64]) -> bool {
        let scalar = |b: &[u8]| -> Option<Scalar> {
            Option::from(Scalar::from_be_bytes(b.try_into().ok()?))
        };
        let (Some(c), Some(z)) = (scalar(&proof[..32]), scalar(&proof[32..])) else {
            return false;
        };
        // A = z·g1 − c·R, B = z·P − c·S; the proof holds if c hashes them back.
        let a = (G1Projective::generator() * z - G1Projective::from(ephemeral.0) * c).to_affine();
        let b = (G1Projective::from(receiver.0) * z - G1Projective::from(self.0) * c).to_affine();
        c == hash_to_scalar(
            &transcript(&ephemeral.0, &receiver.0, &self.0, Some((&a, &b))),
            DLEQ_DOMAIN,
        )
    }
}

/// Domain of the equal-logs challenge.
const DLEQ_DOMAIN: &[u8] = b"gonka/dkg-dleq/v1";
/// Domain of the equal-logs nonce (derived, not drawn: no randomness needed).
const DLEQ_NONCE_DOMAIN: &[u8] = b"gonka/dkg-dleq-nonce/v1";

fn transcript(
    r: &G1Affine,
    p: &G1Affine,
    s: &G1Affine,
    ab: Option<(&G1Affine, &G1Affine)>,
) -> Vec<u8> {
    let mut t = Vec::with_capacity(6 * 48);
    for point in [r, p, s] {
        t.extend_from_slice(&point.to_compressed());
    }
    if let Some((a, b)) = ab {
        t.extend_from_slice(&a.to_compressed());
        t.extend_from_slice(&b.to_compressed());
    }
    t
}

fn hash_to_scalar(input: &[u8], domain: &[u8]) -> Scalar {
    Scalar::hash::<ExpandMsgXmd<Sha256>>(input, domain)
}

/// Decrypts the share of slot `index` from `ciphertext`, with the receiver's secret key and
/// the dealing's ephemeral point; `None` if the bytes are no scalar (check the result against
/// the dealer's commitments either way).
pub fn decrypt_share(
    receiver: &SecretKey,
    ephemeral: &PublicKey,
    index: u64,
    ciphertext: &[u8; 32],
    context: &[u8],
) -> Option<SecretShare> {
    let shared = (G1Projective::from(ephemeral.0) * receiver.0).to_affine();
    decrypt_with_shared(&SharedPoint(shared), index, ciphertext, context)
}

/// Decrypts the share of slot `index` with a revealed shared point.
pub fn decrypt_with_shared(
    shared: &SharedPoint,
    index: u64,
    ciphertext: &[u8; 32],
    context: &[u8],
) -> Option<SecretShare> {
    SecretShare::from_bytes(index, &xor(*ciphertext, pad(context, index, &shared.0)))
}

fn pad(context: &[u8], index: u64, shared: &G1Affine) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(SHARE_DOMAIN);
    hasher.update((context.len() as u64).to_be_bytes());
    hasher.update(context);
    hasher.update(index.to_be_bytes());
    hasher.update(shared.to_compressed());
    hasher.finalize().into()
}

fn xor(mut a: [u8; 32], b: [u8; 32]) -> [u8; 32] {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= y;
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threshold::Polynomial;

    #[test]
    fn only_the_receiver_decrypts_its_share_in_its_context() {
        let f = Polynomial::from_seed(2, b"dealer");
        let commitments = f.commitments();
        let receiver = SecretKey::from_seed(&[1; 32]);
        let other = SecretKey::from_seed(&[2; 32]);
        let r = Ephemeral::from_seed(&[3; 32]);
        let share = f.share(5);
        let ct = r.encrypt(&receiver.public_key(), &share, b"round 1 dealer a");
        let back = decrypt_share(&receiver, &r.public(), 5, &ct, b"round 1 dealer a").unwrap();
        assert!(commitments.verify_share(&back));
        assert_eq!(back.value_bytes(), share.value_bytes());
        let wrong = |got: Option<SecretShare>| got.is_none_or(|s| !commitments.verify_share(&s));
        assert!(wrong(decrypt_share(
            &other,
            &r.public(),
            5,
            &ct,
            b"round 1 dealer a"
        )));
        assert!(wrong(decrypt_share(
            &receiver,
            &r.public(),
            5,
            &ct,
            b"round 2 dealer a"
        )));
        assert!(wrong(decrypt_share(
            &receiver,
            &r.public(),
            6,
            &ct,
            b"round 1 dealer a"
        )));
        assert_ne!(
            ct,
            share.value_bytes(),
            "the share is not sent in the clear"
        );
    }

    #[test]
    fn a_reveal_proves_its_point_and_decrypts_the_shares() {
        let f = Polynomial::from_seed(2, b"dealer");
        let receiver = SecretKey::from_seed(&[1; 32]);
        let r = Ephemeral::from_seed(&[3; 32]);
        let ct = r.encrypt(&receiver.public_key(), &f.share(4), b"ctx");
        let (shared, proof) = r.reveal(&receiver.public_key());
        assert!(shared.verify(&r.public(), &receiver.public_key(), &proof));
        let opened = decrypt_with_shared(&shared, 4, &ct, b"ctx").unwrap();
        assert!(f.commitments().verify_share(&opened));
        // A wrong point, another receiver or a tampered proof does not verify.
        let other = SecretKey::from_seed(&[2; 32]).public_key();
        let (wrong, wrong_proof) = r.reveal(&other);
        assert!(!wrong.verify(&r.public(), &receiver.public_key(), &wrong_proof));
        assert!(!shared.verify(&r.public(), &other, &proof));
        let mut bad = proof;
        bad[63] ^= 1;
        assert!(!shared.verify(&r.public(), &receiver.public_key(), &bad));
        assert_eq!(SharedPoint::from_bytes(&shared.to_bytes()), Some(shared));
    }
}
