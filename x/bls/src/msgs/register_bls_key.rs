//! `MsgRegisterBlsKey`: a stake participant registers (or rotates) its BLS key with a proof
//! of possession bound to the chain and its address.

use gonka_bls_crypto::{PublicKey, Signature};
use gonka_proto::bls::{BlsKey, MsgRegisterBlsKey};
use gonka_proto::signing::bls_pop_bytes;
use gonka_sdk::{decode_as, Any, ErrorCode, Msg, Result, StateWrite, TxContext};
use gonka_stake::StakeRead;

use crate::{events, BlsError, BlsRead, BlsWrite};

struct RegisterBlsKey {
    msg: MsgRegisterBlsKey,
    pubkey: PublicKey,
    proof: Signature,
}

/// Decodes and statelessly checks a `MsgRegisterBlsKey`: the address, and that the key and
/// the proof are points of their groups (no pairing yet: that is charged in `execute`).
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgRegisterBlsKey>(any).map(|msg| {
        let msg = msg?;
        gonka_auth::validate_address("address", &msg.address)
            .map_err(|e| BlsError::InvalidMsg.err(e.log))?;
        let pubkey = PublicKey::from_bytes(&msg.pubkey).ok_or_else(|| {
            BlsError::InvalidMsg.err(format!(
                "pubkey must be a 48-byte compressed BLS12-381 G1 point (not the identity), found {} bytes that are not one",
                msg.pubkey.len()
            ))
        })?;
        let proof = Signature::from_bytes(&msg.proof_of_possession).ok_or_else(|| {
            BlsError::InvalidMsg.err(format!(
                "proof_of_possession must be a 96-byte compressed BLS12-381 G2 point, found {} bytes that are not one",
                msg.proof_of_possession.len()
            ))
        })?;
        Ok(Box::new(RegisterBlsKey { msg, pubkey, proof }) as Box<dyn Msg>)
    })
}

impl Msg for RegisterBlsKey {
    fn signer(&self) -> &str {
        &self.msg.address
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let address = &self.msg.address;
        if state.participant(address)?.is_none() {
            return Err(BlsError::NotParticipant.err(format!(
                "{address} is not a stake participant; stake first (gonkad tx stake create), then register a BLS key"
            )));
        }
        if let Some(owner) = state.bls_key_owner(&self.msg.pubkey)? {
            if owner != *address {
                return Err(BlsError::DuplicateKey.err(format!(
                    "BLS key {} is registered by {owner}; every participant needs its own key",
                    hex::encode(&self.msg.pubkey)
                )));
            }
        }
        ctx.gas.consume_bls_verify("bls proof of possession")?;
        let message = bls_pop_bytes(&ctx.block.chain_id, address, &self.msg.pubkey);
        if !self.pubkey.verify_possession(&message, &self.proof) {
            return Err(BlsError::InvalidProofOfPossession.err(format!(
                "the proof of possession does not verify for key {} of {address} on chain {}: sign gonka/bls-pop/v1 (chain id, address, key) with the key under the _POP_ DST",
                hex::encode(&self.msg.pubkey),
                ctx.block.chain_id
            )));
        }
        let rotated = state.bls_key(address)?.is_some();
        let key = BlsKey {
            address: address.clone(),
            pubkey: self.msg.pubkey.clone(),
            registered_height: ctx.block.height,
        };
        state.put_bls_key(&key)?;
        state.emit(events::registered(&key, rotated));
        Ok(())
    }
}
