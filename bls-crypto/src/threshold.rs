//! Shamir shares with Feldman commitments, partial signatures and their combination
//! (Lagrange interpolation at 0 in the exponent). See the crate docs for the scheme.
//!
//! The polynomial code is the textbook one (`vsss-rs` implements the same for generic groups;
//! these few functions over blst's scalar field need none of its generality).

use blstrs_plus::ff::Field;
use blstrs_plus::group::prime::PrimeCurveAffine;
use blstrs_plus::group::{Curve, Group};
use blstrs_plus::{G1Affine, G1Projective, G2Projective, Scalar};

use sha2::{Digest, Sha256};

use crate::keys::{hash, pairing_check, PublicKey, Signature, PUBLIC_KEY_LEN, SIG_DST};

/// A dealer's secret polynomial `a_0 + a_1·x + … + a_{t−1}·x^{t−1}`: `t` shares determine it.
#[derive(Clone)]
pub struct Polynomial(Vec<Scalar>);

impl std::fmt::Debug for Polynomial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Polynomial(threshold {}, ..)", self.0.len())
    }
}

impl Polynomial {
    /// The polynomial of threshold `threshold` (≥ 1) whose coefficients are the scalars
    /// hashed from `seed`: a dealer draws a random seed and keeps it, so it can rebuild its
    /// dealing and answer complaints after a restart; tests use fixed seeds.
    pub fn from_seed(threshold: usize, seed: &[u8]) -> Polynomial {
        Polynomial(
            (0..threshold.max(1) as u64)
                .map(|k| {
                    let mut input = seed.to_vec();
                    input.extend_from_slice(&k.to_be_bytes());
                    Scalar::hash::<
                        blstrs_plus::elliptic_curve::hash2curve::ExpandMsgXmd<sha2::Sha256>,
                    >(&input, b"gonka/bls-test-polynomial/v1")
                })
                .collect(),
        )
    }

    /// Shares needed to sign: the number of coefficients.
    pub fn threshold(&self) -> usize {
        self.0.len()
    }

    /// The Feldman commitments `a_k·g1`.
    pub fn commitments(&self) -> Commitments {
        Commitments(
            self.0
                .iter()
                .map(|a| (G1Projective::generator() * a).to_affine())
                .collect(),
        )
    }

    /// Share `index` (≥ 1; index 0 would be the secret itself): `f(index)`.
    pub fn share(&self, index: u64) -> SecretShare {
        SecretShare {
            index,
            value: evaluate(&self.0, Scalar::from(index)),
        }
    }
}

/// The polynomial `−f`: what a dealer colluding with the dealer of `f` deals so that their
/// secrets cancel (the attack [`Commitments::has_identity_key`] exists to refuse).
impl std::ops::Neg for &Polynomial {
    type Output = Polynomial;

    fn neg(self) -> Polynomial {
        Polynomial(self.0.iter().map(|a| -*a).collect())
    }
}

/// `Σ_k coefficients[k]·x^k` by Horner's rule.
fn evaluate<T>(coefficients: &[T], x: Scalar) -> T
where
    T: Copy + std::ops::Mul<Scalar, Output = T> + std::ops::Add<Output = T>,
{
    let mut acc = *coefficients.last().expect("a polynomial has a coefficient");
    for c in coefficients.iter().rev().skip(1) {
        acc = acc * x + *c;
    }
    acc
}

/// `x·point` by double-and-add over the bits of `x`: fast for the small public indexes of
/// shares (not constant-time, so never for a secret).
fn mul_public(point: G1Projective, x: u64) -> G1Projective {
    let mut acc = G1Projective::identity();
    for bit in (0..64 - x.leading_zeros()).rev() {
        acc = acc.double();
        if x >> bit & 1 == 1 {
            acc += point;
        }
    }
    acc
}

/// A dealer's Feldman commitments, `C_k = a_k·g1` (or their sum over dealers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commitments(Vec<G1Affine>);

impl Commitments {
    /// The threshold they commit to.
    pub fn threshold(&self) -> usize {
        self.0.len()
    }

    /// `C_0`: the public key of the dealt secret.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0[0])
    }

    /// The public key of share `index`: `Σ_k index^k·C_k`, by Horner's rule with the
    /// multiplications by the (public, small) index done by doubling and adding.
    pub fn public_share(&self, index: u64) -> PublicKey {
        let mut acc = G1Projective::from(*self.0.last().expect("at least one commitment"));
        for c in self.0.iter().rev().skip(1) {
            acc = mul_public(acc, index) + G1Projective::from(*c);
        }
        PublicKey(acc.to_affine())
    }

    /// Whether the committed secret's public key, or the public share of any slot in
    /// `1..=slots`, is the identity point: dealers whose polynomials cancel (at 0, or at one
    /// slot's index) would make a group key nothing verifies against, or a slot whose
    /// partial signature is the identity whatever message it signs. A key generation round
    /// ending in such commitments must fail. Costs `slots` evaluations.
    pub fn has_identity_key(&self, slots: u64) -> bool {
        bool::from(self.0[0].is_identity())
            || (1..=slots).any(|i| bool::from(self.public_share(i).0.is_identity()))
    }

    /// Whether `share` is the dealer's share `share.index` (Feldman's check).
    pub fn verify_share(&self, share: &SecretShare) -> bool {
        share.index != 0
            && (G1Projective::generator() * share.value).to_affine()
                == self.public_share(share.index).0
    }

    /// The commitments of the sum of the dealers' polynomials (a DKG's group commitments);
    /// `None` if there are none or their thresholds differ.
    pub fn sum(dealers: &[Commitments]) -> Option<Commitments> {
        let threshold = dealers.first()?.threshold();
        if dealers.iter().any(|d| d.threshold() != threshold) {
            return None;
        }
        Some(Commitments(
            (0..threshold)
                .map(|k| {
                    dealers
                        .iter()
                        .map(|d| G1Projective::from(d.0[k]))
                        .sum::<G1Projective>()
                        .to_affine()
                })
                .collect(),
        ))
    }

    /// The commitments as `threshold × 48` bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.0.iter().flat_map(|c| c.to_compressed()).collect()
    }

    /// Decodes commitments that [`Commitments::from_bytes`] accepted before (stored ones),
    /// skipping the subgroup checks, which dominate decoding; `None` if they are no points.
    pub fn from_checked_bytes(bytes: &[u8]) -> Option<Commitments> {
        decode_points(bytes, |c| G1Affine::from_compressed_unchecked(c).into())
    }

    /// Decodes [`Commitments::to_bytes`]; `None` unless every 48 bytes are a subgroup point
    /// and there is at least one.
    pub fn from_bytes(bytes: &[u8]) -> Option<Commitments> {
        decode_points(bytes, |c| G1Affine::from_compressed(c).into())
    }
}

/// Decodes `bytes` as 48-byte points with `decode`; `None` if empty, ragged or any fails.
fn decode_points(
    bytes: &[u8],
    decode: impl Fn(&[u8; PUBLIC_KEY_LEN]) -> Option<G1Affine>,
) -> Option<Commitments> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(PUBLIC_KEY_LEN) {
        return None;
    }
    bytes
        .chunks(PUBLIC_KEY_LEN)
        .map(|c| decode(c.try_into().ok()?))
        .collect::<Option<Vec<_>>>()
        .map(Commitments)
}

/// One share of a dealt secret: `f(index)`. `Debug` never prints the value.
#[derive(Clone, Copy)]
pub struct SecretShare {
    /// Its index (≥ 1).
    pub index: u64,
    value: Scalar,
}

impl std::fmt::Debug for SecretShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretShare(index {}, ..)", self.index)
    }
}

impl SecretShare {
    /// The sum of shares of the same index from several dealers (a DKG participant's share);
    /// `None` if there are none or the indexes differ.
    pub fn sum(shares: &[SecretShare]) -> Option<SecretShare> {
        let index = shares.first()?.index;
        if shares.iter().any(|s| s.index != index) {
            return None;
        }
        Some(SecretShare {
            index,
            value: shares.iter().map(|s| s.value).sum(),
        })
    }

    /// The partial signature of `msg` under this share.
    pub fn sign(&self, msg: &[u8]) -> PartialSignature {
        PartialSignature {
            index: self.index,
            signature: Signature((hash(msg, SIG_DST) * self.value).to_affine()),
        }
    }

    /// Share `index` of 32 big-endian bytes (a stored or decrypted share); `None` if they are
    /// no scalar.
    pub fn from_bytes(index: u64, bytes: &[u8; 32]) -> Option<SecretShare> {
        Option::<Scalar>::from(Scalar::from_be_bytes(bytes))
            .map(|value| SecretShare { index, value })
    }

    /// The 32-byte big-endian value (what a participant stores, and what a dealer encrypts).
    pub fn value_bytes(&self) -> [u8; 32] {
        self.value.to_be_bytes()
    }
}

/// A partial signature by share `index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialSignature {
    /// The share's index.
    pub index: u64,
    /// `f(index)·H(m)`.
    pub signature: Signature,
}

impl PartialSignature {
    /// Whether it signs `msg` under share `index` of `commitments` (the group commitments).
    pub fn verify(&self, commitments: &Commitments, msg: &[u8]) -> bool {
        self.index != 0
            && pairing_check(
                &commitments.public_share(self.index).0,
                msg,
                SIG_DST,
                &self.signature.0,
            )
    }
}

/// Partial signatures of `msg` by each of `shares`, hashing `msg` once.
pub fn sign_all(shares: &[SecretShare], msg: &[u8]) -> Vec<PartialSignature> {
    let hashed = hash(msg, SIG_DST);
    shares
        .iter()
        .map(|s| PartialSignature {
            index: s.index,
            signature: Signature((hashed * s.value).to_affine()),
        })
        .collect()
}

/// Domain of the coefficients [`PublicShares::verify_batch`] draws.
const BATCH_DOMAIN: &[u8] = b"gonka/bls-partial-batch/v1";

/// The public keys of slots `1..=slots` of a group (its commitments evaluated at each
/// index), computed once per group so that checking partial signatures needs no
/// polynomial evaluation.
#[derive(Clone, Debug)]
pub struct PublicShares(Vec<G1Affine>);

impl PublicShares {
    /// The public shares of slots `1..=slots` of `commitments`.
    pub fn new(commitments: &Commitments, slots: u64) -> PublicShares {
        PublicShares((1..=slots).map(|i| commitments.public_share(i).0).collect())
    }

    /// Slots covered.
    pub fn slots(&self) -> u64 {
        self.0.len() as u64
    }

    /// Whether every partial in `partials` signs `msg` under its slot's public share, in one
    /// pairing check: `e(Σ r_i·pk_i, H(m)) = e(g1, Σ r_i·σ_i)` with 128-bit `r_i` hashed from
    /// the message and all the partials (so a signer cannot make invalid partials that
    /// cancel out). `false` for no partial, a repeated slot or a slot outside the group.
    pub fn verify_batch(&self, msg: &[u8], partials: &[PartialSignature]) -> bool {
        let mut seen = std::collections::BTreeSet::new();
        let mut keys = Vec::with_capacity(partials.len());
        for p in partials {
            if p.index == 0 || p.index > self.slots() || !seen.insert(p.index) {
                return false;
            }
            keys.push(G1Projective::from(self.0[(p.index - 1) as usize]));
        }
        if partials.is_empty() {
            return false;
        }
        let mut transcript = Sha256::new();
        transcript.update(BATCH_DOMAIN);
        transcript.update((msg.len() as u64).to_be_bytes());
        transcript.update(msg);
        for p in partials {
            transcript.update(p.index.to_be_bytes());
            transcript.update(p.signature.to_bytes());
        }
        let transcript = transcript.finalize();
        let coefficients: Vec<Scalar> = (0..partials.len() as u64)
            .map(|i| {
                let mut h = Sha256::new();
                h.update(transcript);
                h.update(i.to_be_bytes());
                let digest = h.finalize();
                let mut wide = [0u8; 32];
                wide[16..].copy_from_slice(&digest[..16]);
                Option::<Scalar>::from(Scalar::from_be_bytes(&wide)).expect("128 bits fit")
            })
            .collect();
        let signatures: Vec<G2Projective> = partials
            .iter()
            .map(|p| G2Projective::from(p.signature.0))
            .collect();
        let key = G1Projective::sum_of_products(&keys, &coefficients).to_affine();
        let signature = G2Projective::sum_of_products(&signatures, &coefficients).to_affine();
        pairing_check(&key, msg, SIG_DST, &signature)
    }
}

/// The Lagrange coefficients at 0 of the distinct, non-zero `indexes`:
/// `λ_i = Π_{j≠i} j / (j − i)`. `None` for a repeated or zero index.
pub fn lagrange_at_zero(indexes: &[u64]) -> Option<Vec<Scalar>> {
    let mut seen = std::collections::BTreeSet::new();
    if indexes.iter().any(|i| *i == 0 || !seen.insert(*i)) {
        return None;
    }
    let xs: Vec<Scalar> = indexes.iter().map(|&i| Scalar::from(i)).collect();
    // λ_i = (Π_j x_j) / (x_i · Π_{j≠i} (x_j − x_i)): one shared numerator, and the
    // denominators inverted together (one inversion and three products each).
    let numerator: Scalar = xs.iter().product();
    let denominators: Vec<Scalar> = xs
        .iter()
        .enumerate()
        .map(|(i, xi)| {
            xs.iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .fold(*xi, |acc, (_, xj)| acc * (xj - xi))
        })
        .collect();
    let inverses = batch_invert(&denominators)?;
    Some(inverses.into_iter().map(|inv| numerator * inv).collect())
}

/// The inverses of `values` with one field inversion (Montgomery's trick); `None` if one is
/// zero.
fn batch_invert(values: &[Scalar]) -> Option<Vec<Scalar>> {
    let mut prefix = Vec::with_capacity(values.len());
    let mut acc = Scalar::ONE;
    for v in values {
        prefix.push(acc);
        acc *= v;
    }
    let mut inv = Option::<Scalar>::from(acc.invert())?;
    let mut out = vec![Scalar::ZERO; values.len()];
    for (k, v) in values.iter().enumerate().rev() {
        out[k] = inv * prefix[k];
        inv *= v;
    }
    Some(out)
}

/// Combines partial signatures of distinct shares into `Σ λ_i·σ_i`. With at least the
/// threshold of valid partials this is the group signature, the same for every such set;
/// `None` for no partial or repeated indexes. Verify the partials first (or the result).
pub fn combine(partials: &[PartialSignature]) -> Option<Signature> {
    if partials.is_empty() {
        return None;
    }
    let indexes: Vec<u64> = partials.iter().map(|p| p.index).collect();
    let lambdas = lagrange_at_zero(&indexes)?;
    let points: Vec<G2Projective> = partials
        .iter()
        .map(|p| G2Projective::from(p.signature.0))
        .collect();
    // Many partials: one multi-scalar multiplication (Pippenger); a few: a product each,
    // which is faster below about 16 points.
    let sum = if points.len() > 16 {
        G2Projective::sum_of_products(&points, &lambdas)
    } else {
        points.iter().zip(&lambdas).map(|(p, l)| p * l).sum()
    };
    Some(Signature(sum.to_affine()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_threshold_of_shares_makes_the_same_group_signature() {
        let f = Polynomial::from_seed(3, b"dealer");
        let commitments = f.commitments();
        let shares: Vec<SecretShare> = (1..=5).map(|i| f.share(i)).collect();
        assert!(shares.iter().all(|s| commitments.verify_share(s)));
        let msg = b"chain 7 height 12";
        let partials: Vec<PartialSignature> = shares.iter().map(|s| s.sign(msg)).collect();
        assert!(partials.iter().all(|p| p.verify(&commitments, msg)));
        let group = combine(&partials[..3]).unwrap();
        assert!(commitments.public_key().verify(msg, &group));
        for subset in [[0, 1, 2], [2, 3, 4], [0, 2, 4], [4, 1, 3]] {
            let chosen: Vec<PartialSignature> = subset.iter().map(|&k| partials[k]).collect();
            assert_eq!(combine(&chosen), Some(group), "subset {subset:?}");
        }
        assert_eq!(combine(&partials), Some(group), "more than the threshold");
        let two = combine(&partials[..2]).unwrap();
        assert!(
            !commitments.public_key().verify(msg, &two),
            "below the threshold"
        );
        assert!(combine(&[partials[0], partials[0], partials[1]]).is_none());
        assert!(combine(&[]).is_none());
    }

    #[test]
    fn cancelling_dealers_make_an_identity_key_and_honest_ones_do_not() {
        let f = Polynomial::from_seed(3, b"colluder");
        let g = Polynomial::from_seed(3, b"honest");
        let honest = Commitments::sum(&[f.commitments(), g.commitments()]).unwrap();
        assert!(!honest.has_identity_key(20));
        let cancelled = Commitments::sum(&[f.commitments(), (-&f).commitments()]).unwrap();
        assert!(
            cancelled.has_identity_key(20),
            "the group key is the identity"
        );
        // A polynomial with a root at slot 5: f(x) − f(5), whose constant term is not zero.
        let constant = Polynomial(vec![f.share(5).value, Scalar::ZERO, Scalar::ZERO]);
        let rooted = Commitments::sum(&[f.commitments(), (-&constant).commitments()]).unwrap();
        assert!(!bool::from(rooted.public_key().0.is_identity()));
        assert!(!rooted.has_identity_key(4), "slots 1..=4 are sound");
        assert!(
            rooted.has_identity_key(5),
            "slot 5's public share is the identity"
        );
    }

    #[test]
    fn batch_verification_takes_valid_partials_and_refuses_any_bad_one() {
        let f = Polynomial::from_seed(3, b"batch");
        let public = PublicShares::new(&f.commitments(), 6);
        let shares: Vec<SecretShare> = (1..=6).map(|i| f.share(i)).collect();
        let msg = b"chain c height 9";
        let partials = sign_all(&shares, msg);
        assert_eq!(partials[2], shares[2].sign(msg));
        assert!(public.verify_batch(msg, &partials));
        assert!(public.verify_batch(msg, &partials[1..2]));
        assert!(!public.verify_batch(b"chain c height 10", &partials));
        // Two partials whose errors cancel out in a plain sum are still refused.
        let delta = shares[0].sign(b"anything").signature.0;
        let mut cancelling = partials.clone();
        cancelling[0].signature =
            Signature((G2Projective::from(cancelling[0].signature.0) + delta).to_affine());
        cancelling[1].signature =
            Signature((G2Projective::from(cancelling[1].signature.0) - delta).to_affine());
        assert!(!public.verify_batch(msg, &cancelling));
        let mut wrong_slot = partials.clone();
        wrong_slot[0].index = 2;
        assert!(!public.verify_batch(msg, &wrong_slot), "repeated slot");
        let mut outside = partials[..1].to_vec();
        outside[0].index = 7;
        assert!(
            !public.verify_batch(msg, &outside),
            "slot outside the group"
        );
        assert!(!public.verify_batch(msg, &[]));
    }

    #[test]
    fn a_dkg_of_several_dealers_gives_one_group_key() {
        let dealers: Vec<Polynomial> = (0..4u8).map(|d| Polynomial::from_seed(3, &[d])).collect();
        let group = Commitments::sum(
            &dealers
                .iter()
                .map(Polynomial::commitments)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        let msg = b"epoch 3";
        let partials: Vec<PartialSignature> = (1..=4u64)
            .map(|i| {
                let mine: Vec<SecretShare> = dealers.iter().map(|d| d.share(i)).collect();
                let share = SecretShare::sum(&mine).unwrap();
                assert!(group.verify_share(&share));
                share.sign(msg)
            })
            .collect();
        let sig = combine(&partials[1..]).unwrap();
        assert!(group.public_key().verify(msg, &sig));
        assert_eq!(sig, combine(&partials[..3]).unwrap());
        assert_eq!(
            Commitments::from_bytes(&group.to_bytes()),
            Some(group.clone())
        );
        assert!(Commitments::from_bytes(&group.to_bytes()[1..]).is_none());
        assert_eq!(
            Commitments::from_checked_bytes(&group.to_bytes()),
            Some(group.clone())
        );
        assert!(
            Commitments::sum(&[group.clone(), Polynomial::from_seed(2, b"x").commitments()])
                .is_none()
        );
    }

    #[test]
    fn feldman_catches_a_wrong_share_and_a_wrong_partial() {
        let f = Polynomial::from_seed(2, b"dealer");
        let g = Polynomial::from_seed(2, b"other");
        let commitments = f.commitments();
        assert!(
            !commitments.verify_share(&g.share(1)),
            "another dealer's share"
        );
        let moved = SecretShare {
            index: 2,
            ..f.share(1)
        };
        assert!(
            !commitments.verify_share(&moved),
            "a share under another index"
        );
        assert!(!commitments.verify_share(&SecretShare {
            index: 0,
            ..f.share(0)
        }));
        let forged = g.share(1).sign(b"m");
        assert!(!forged.verify(&commitments, b"m"));
        assert!(!f.share(1).sign(b"m").verify(&commitments, b"n"));
    }

    #[test]
    fn lagrange_refuses_zero_and_repeats() {
        assert!(lagrange_at_zero(&[1, 2, 3]).is_some());
        assert!(lagrange_at_zero(&[0, 2]).is_none());
        assert!(lagrange_at_zero(&[2, 2]).is_none());
        // λ for {1, 2}: λ1 = 2/(2−1) = 2, λ2 = 1/(1−2) = −1.
        let l = lagrange_at_zero(&[1, 2]).unwrap();
        assert_eq!(l, vec![Scalar::from(2u64), -Scalar::ONE]);
    }
}
