//! The ABCI socket server CometBFT connects to.
//!
//! We own the accept loop (rather than `tendermint_abci::Server`) for one reason: every
//! accepted socket gets `TCP_NODELAY`. CometBFT's socket client writes a request and then a
//! `Flush` and waits for both answers; with Nagle's algorithm on, our small answers sat behind
//! the peer's delayed ACK, so every synchronous ABCI call (`abci_query`, `abci_info`, CheckTx)
//! cost ≈ 40 ms instead of ≈ 1 ms.
//!
//! Wire format (CometBFT's socket protocol): each message is a protobuf `Request` or
//! `Response` prefixed by its length as an unsigned varint. One thread serves each of
//! CometBFT's four connections (consensus, mempool, query, snapshot), answering requests in
//! order.

use std::io::{BufReader, BufWriter, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};

use prost::Message;
use tendermint_abci::Application;
use tendermint_proto::v0_38::abci::{request, response, Request, Response};

/// Largest message accepted: well above CometBFT's maximum block size (100 MiB), so only a
/// broken peer hits it.
const MAX_MESSAGE_BYTES: u64 = 128 * 1024 * 1024;

/// Serves `app` on `listener` until accepting fails; each connection runs on its own thread.
pub fn serve_abci<A: Application>(listener: TcpListener, app: A) -> std::io::Result<()> {
    loop {
        let (stream, peer) = listener.accept()?;
        // The point of this server: answers leave at once instead of waiting on Nagle.
        stream.set_nodelay(true)?;
        tracing::info!(%peer, "ABCI connection accepted");
        let app = app.clone();
        std::thread::spawn(move || match serve_connection(stream, &app) {
            Ok(()) => tracing::info!(%peer, "ABCI connection closed"),
            Err(e) => tracing::error!(%peer, error = %e, "ABCI connection failed"),
        });
    }
}

/// Answers the requests of one connection in order until the peer closes it.
fn serve_connection<A: Application>(stream: TcpStream, app: &A) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    while let Some(request) = read_delimited::<Request>(&mut reader)? {
        let response = dispatch(app, request)?;
        writer.write_all(&response.encode_length_delimited_to_vec())?;
        // Write out whenever no further request is already buffered, so pipelined requests
        // are answered in one write and a lone request is answered at once.
        if reader.buffer().is_empty() {
            writer.flush()?;
        }
    }
    writer.flush()
}

/// Reads one message in CometBFT's socket framing (a varint length, then the protobuf);
/// `None` when the peer closed the connection cleanly before it.
pub fn read_delimited<M: Message + Default>(reader: &mut impl Read) -> std::io::Result<Option<M>> {
    let mut length: u64 = 0;
    for i in 0..10 {
        let mut byte = [0u8; 1];
        if let Err(e) = reader.read_exact(&mut byte) {
            return match e.kind() {
                ErrorKind::UnexpectedEof if i == 0 => Ok(None),
                _ => Err(e),
            };
        }
        length |= u64::from(byte[0] & 0x7f) << (7 * i);
        if byte[0] & 0x80 == 0 {
            if length > MAX_MESSAGE_BYTES {
                return Err(invalid(format!(
                    "ABCI message of {length} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit"
                )));
            }
            let mut body = vec![0u8; length as usize];
            reader.read_exact(&mut body)?;
            return M::decode(body.as_slice())
                .map(Some)
                .map_err(|e| invalid(format!("ABCI message is not a valid protobuf: {e}")));
        }
    }
    Err(invalid("ABCI length prefix is longer than 10 bytes".into()))
}

/// Calls the application method for `request`.
fn dispatch<A: Application>(app: &A, request: Request) -> std::io::Result<Response> {
    use request::Value as Req;
    use response::Value as Res;
    let value = request
        .value
        .ok_or_else(|| invalid("ABCI request without a value".into()))?;
    let value = match value {
        Req::Echo(r) => Res::Echo(app.echo(r)),
        Req::Flush(_) => Res::Flush(app.flush()),
        Req::Info(r) => Res::Info(app.info(r)),
        Req::InitChain(r) => Res::InitChain(app.init_chain(r)),
        Req::Query(r) => Res::Query(app.query(r)),
        Req::CheckTx(r) => Res::CheckTx(app.check_tx(r)),
        Req::Commit(_) => Res::Commit(app.commit()),
        Req::ListSnapshots(_) => Res::ListSnapshots(app.list_snapshots()),
        Req::OfferSnapshot(r) => Res::OfferSnapshot(app.offer_snapshot(r)),
        Req::LoadSnapshotChunk(r) => Res::LoadSnapshotChunk(app.load_snapshot_chunk(r)),
        Req::ApplySnapshotChunk(r) => Res::ApplySnapshotChunk(app.apply_snapshot_chunk(r)),
        Req::PrepareProposal(r) => Res::PrepareProposal(app.prepare_proposal(r)),
        Req::ProcessProposal(r) => Res::ProcessProposal(app.process_proposal(r)),
        Req::ExtendVote(r) => Res::ExtendVote(app.extend_vote(r)),
        Req::VerifyVoteExtension(r) => Res::VerifyVoteExtension(app.verify_vote_extension(r)),
        Req::FinalizeBlock(r) => Res::FinalizeBlock(app.finalize_block(r)),
    };
    Ok(Response { value: Some(value) })
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tendermint_abci::Application;
    use tendermint_proto::v0_38::abci::{RequestEcho, RequestInfo, ResponseInfo};

    #[derive(Clone)]
    struct Fixed;
    impl Application for Fixed {
        fn info(&self, _: RequestInfo) -> ResponseInfo {
            ResponseInfo {
                data: "fixed".into(),
                ..Default::default()
            }
        }
    }

    fn request(value: request::Value) -> Vec<u8> {
        Request { value: Some(value) }.encode_length_delimited_to_vec()
    }

    #[test]
    fn answers_pipelined_requests_in_order() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || serve_abci(listener, Fixed));
        let mut client = TcpStream::connect(addr).unwrap();
        let mut bytes = request(request::Value::Echo(RequestEcho {
            message: "hi".into(),
        }));
        bytes.extend(request(request::Value::Info(RequestInfo::default())));
        bytes.extend(request(request::Value::Flush(Default::default())));
        client.write_all(&bytes).unwrap();
        let mut reader = BufReader::new(client);
        let mut answers = Vec::new();
        for _ in 0..3 {
            let answer = read_delimited::<Response>(&mut reader).unwrap().unwrap();
            answers.push(answer.value.unwrap());
        }
        assert!(matches!(&answers[0], response::Value::Echo(e) if e.message == "hi"));
        assert!(matches!(&answers[1], response::Value::Info(i) if i.data == "fixed"));
        assert!(matches!(answers[2], response::Value::Flush(_)));
    }

    #[test]
    fn refuses_an_oversized_or_garbled_request() {
        let mut too_long = Vec::new();
        prost::encoding::encode_varint(MAX_MESSAGE_BYTES + 1, &mut too_long);
        let err = read_delimited::<Request>(&mut too_long.as_slice()).unwrap_err();
        assert!(err.to_string().contains("exceeds"), "{err}");
        let garbled = [3u8, 0xff, 0xff, 0xff];
        assert!(read_delimited::<Request>(&mut garbled.as_slice()).is_err());
        assert!(read_delimited::<Request>(&mut [].as_slice())
            .unwrap()
            .is_none());
    }
}
