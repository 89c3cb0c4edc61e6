//! Typed access to bls state; other crates use these traits, never the keys.

use gonka_proto::bls::{Beacon, BlsKey, Complaint, Dealing, DkgRound, Params, SignRequest};
use gonka_proto::query::page::PageRequest;
use gonka_sdk::{paginate_proto, Page, Result, StateRead, StateReadExt, StateWrite, StateWriteExt};

use crate::{default_params, keys};

/// Reads of bls state.
pub trait BlsRead: StateRead {
    /// The BLS key of participant `address`.
    fn bls_key(&self, address: &str) -> Result<Option<BlsKey>> {
        self.get_proto(&keys::bls_key(address))
    }

    /// The participant that registered `pubkey`, if any.
    fn bls_key_owner(&self, pubkey: &[u8]) -> Result<Option<String>> {
        Ok(self
            .get_raw(&keys::pubkey_owner(pubkey))?
            .map(|owner| String::from_utf8_lossy(&owner).into_owned()))
    }

    /// Every registered key, ascending by address (genesis export: the whole table).
    fn bls_keys(&self) -> Result<Vec<BlsKey>> {
        Ok(self
            .prefix_proto(&keys::bls_keys())?
            .into_iter()
            .map(|(_, k)| k)
            .collect())
    }

    /// Current parameters (the defaults if genesis stored none).
    fn bls_params(&self) -> Result<Params> {
        Ok(self
            .get_proto(&keys::params())?
            .unwrap_or_else(default_params))
    }

    /// Key generation round `id`.
    fn dkg_round(&self, id: u64) -> Result<Option<DkgRound>> {
        self.get_proto(&keys::dkg_round(id))
    }

    /// The latest round, running or finished.
    fn latest_dkg_round(&self) -> Result<Option<DkgRound>> {
        match self.get_proto::<u64>(&keys::latest_round())? {
            Some(id) => self.dkg_round(id),
            None => Ok(None),
        }
    }

    /// The group in force: the latest completed round.
    fn group_round(&self) -> Result<Option<DkgRound>> {
        match self.get_proto::<u64>(&keys::group_round())? {
            Some(id) => self.dkg_round(id),
            None => Ok(None),
        }
    }

    /// The completed round the group in force replaced, if any.
    fn previous_group_round(&self) -> Result<Option<DkgRound>> {
        match self.get_proto::<u64>(&keys::previous_group_round())? {
            Some(id) => self.dkg_round(id),
            None => Ok(None),
        }
    }

    /// The beacon recorded for `height`, if still kept.
    fn beacon(&self, height: u64) -> Result<Option<Beacon>> {
        self.get_proto(&keys::beacon(height))
    }

    /// The latest height with a recorded beacon (0 before the first).
    fn latest_beacon_height(&self) -> Result<u64> {
        Ok(self.get_proto::<u64>(&keys::latest_beacon())?.unwrap_or(0))
    }

    /// Signing request `id`.
    fn sign_request(&self, id: u64) -> Result<Option<SignRequest>> {
        self.get_proto(&keys::sign_request(id))
    }

    /// The oldest signing request not yet signed or expired.
    fn first_unsigned_request(&self) -> Result<Option<SignRequest>> {
        let first = self
            .get_proto::<u64>(&keys::first_unsigned_request())?
            .unwrap_or(1);
        self.sign_request(first)
    }

    /// Epoch `epoch`'s certificate request, signed or not.
    fn certificate(&self, epoch: u64) -> Result<Option<SignRequest>> {
        match self.get_proto::<u64>(&keys::certificate(epoch))? {
            Some(id) => self.sign_request(id),
            None => Ok(None),
        }
    }

    /// Round `round`'s handover request, signed or not.
    fn handover(&self, round: u64) -> Result<Option<SignRequest>> {
        match self.get_proto::<u64>(&keys::handover(round))? {
            Some(id) => self.sign_request(id),
            None => Ok(None),
        }
    }

    /// The genesis signers (the trust root of group keys), ascending by address.
    fn genesis_signers(&self) -> Result<Vec<BlsKey>> {
        Ok(self
            .prefix_proto(&keys::genesis_signers())?
            .into_iter()
            .map(|(_, k)| k)
            .collect())
    }

    /// `dealer`'s dealing in round `round`.
    fn dealing(&self, round: u64, dealer: &str) -> Result<Option<Dealing>> {
        self.get_proto(&keys::dealing(round, dealer))
    }

    /// `complainer`'s complaint about `dealer` in round `round`.
    fn complaint(&self, round: u64, dealer: &str, complainer: &str) -> Result<Option<Complaint>> {
        self.get_proto(&keys::complaint(round, dealer, complainer))
    }

    /// The complaints about `dealer` in round `round`, by complainer.
    fn complaints_about(&self, round: u64, dealer: &str) -> Result<Vec<Complaint>> {
        Ok(self
            .prefix_proto(&keys::complaints_about(round, dealer))?
            .into_iter()
            .map(|(_, c)| c)
            .collect())
    }

    /// One page of the registered keys, ascending by address.
    fn bls_keys_page(&self, page: Option<&PageRequest>) -> Result<Page<BlsKey>> {
        paginate_proto(self, &keys::bls_keys(), page, |_, k| Ok(Some(k)))
    }
}

impl<T: StateRead + ?Sized> BlsRead for T {}

/// Writes of bls state.
pub trait BlsWrite: StateWrite {
    /// Stores `key` as its participant's key, freeing the participant's previous public key.
    fn put_bls_key(&mut self, key: &BlsKey) -> Result<()> {
        if let Some(old) = self.bls_key(&key.address)? {
            self.delete_raw(keys::pubkey_owner(&old.pubkey));
        }
        self.put_proto(keys::bls_key(&key.address), key);
        self.put_raw(
            keys::pubkey_owner(&key.pubkey),
            key.address.as_bytes().to_vec(),
        );
        Ok(())
    }
}

impl<T: StateWrite + ?Sized> BlsWrite for T {}

/// Writes of key generation state.
pub trait DkgWrite: StateWrite {
    /// Replaces the parameters.
    fn put_bls_params(&mut self, params: &Params) {
        self.put_proto(keys::params(), params);
    }

    /// Stores a round; a new id becomes the latest round, a completed one the group (and
    /// the group it replaces the previous group).
    fn put_dkg_round(&mut self, round: &DkgRound) -> Result<()> {
        self.put_proto(keys::dkg_round(round.id), round);
        self.put_proto(keys::latest_round(), &round.id);
        if round.status == crate::status::COMPLETED {
            if let Some(old) = self.get_proto::<u64>(&keys::group_round())? {
                if old != round.id {
                    self.put_proto(keys::previous_group_round(), &old);
                }
            }
            self.put_proto(keys::group_round(), &round.id);
        }
        Ok(())
    }

    /// Records `beacon` and forgets the one `keep` heights older.
    fn put_beacon(&mut self, beacon: &Beacon, keep: u64) {
        self.put_proto(keys::beacon(beacon.height), beacon);
        self.put_proto(keys::latest_beacon(), &beacon.height);
        if let Some(old) = beacon.height.checked_sub(keep) {
            self.delete_raw(keys::beacon(old));
        }
    }

    /// Stores a dealing.
    fn put_dealing(&mut self, dealing: &Dealing) {
        self.put_proto(keys::dealing(dealing.round, &dealing.dealer), dealing);
    }

    /// Forgets the dealings and complaints of every round below `keep` (their groups sign
    /// nothing any more; the rounds themselves stay). Each round is visited once.
    fn prune_rounds_below(&mut self, keep: u64) -> Result<()> {
        let from = self
            .get_proto::<u64>(&keys::kept_rounds_from())?
            .unwrap_or(1);
        for round in from..keep {
            for prefix in [keys::dealings_of(round), keys::complaints_of(round)] {
                for (key, _) in self.prefix_raw(&prefix)? {
                    self.delete_raw(key);
                }
            }
        }
        if keep > from {
            self.put_proto(keys::kept_rounds_from(), &keep);
        }
        Ok(())
    }

    /// Stores a complaint.
    fn put_complaint(&mut self, complaint: &Complaint) {
        self.put_proto(
            keys::complaint(complaint.round, &complaint.dealer, &complaint.complainer),
            complaint,
        );
    }
}

impl<T: StateWrite + ?Sized> DkgWrite for T {}

/// Writes of signing requests.
pub trait SignWrite: StateWrite {
    /// Stores `request` under the next id, which it returns.
    fn queue_sign_request(&mut self, mut request: SignRequest) -> Result<u64> {
        let id = self
            .get_proto::<u64>(&keys::next_sign_request())?
            .unwrap_or(1);
        request.id = id;
        self.put_proto(keys::sign_request(id), &request);
        self.put_proto(keys::next_sign_request(), &(id + 1));
        Ok(id)
    }

    /// Stores the signed (or expired) `request`; the next request becomes the pending one.
    fn finish_sign_request(&mut self, request: &SignRequest) {
        self.put_proto(keys::sign_request(request.id), request);
        self.put_proto(keys::first_unsigned_request(), &(request.id + 1));
    }

    /// Indexes request `id` as epoch `epoch`'s certificate.
    fn index_certificate(&mut self, epoch: u64, id: u64) {
        self.put_proto(keys::certificate(epoch), &id);
    }

    /// Indexes request `id` as round `round`'s handover.
    fn index_handover(&mut self, round: u64, id: u64) {
        self.put_proto(keys::handover(round), &id);
    }

    /// Stores a genesis signer.
    fn put_genesis_signer(&mut self, key: &BlsKey) {
        self.put_proto(keys::genesis_signer(&key.address), key);
    }
}

impl<T: StateWrite + ?Sized> SignWrite for T {}
