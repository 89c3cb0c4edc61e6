//! Benchmark: the time of one synchronous ABCI call over the socket, as CometBFT's socket
//! client makes it (a request, then a `Flush`, each in its own write on a `TCP_NODELAY`
//! socket, then wait for both answers), served by [`gonka_app::serve_abci`] and, as the
//! baseline in the same run, by `tendermint_abci::Server` (which leaves Nagle's algorithm
//! on, so the second answer waits for the client's delayed ACK).
//!
//! Run: `cargo bench -p gonka-app --bench abci_socket`

// A benchmark measures wall-clock time; it is not part of the state machine.
#![allow(clippy::disallowed_methods)]

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Instant;

use gonka_app::{read_delimited, App};
use prost::Message;
use tendermint_proto::v0_38::abci::{request, Request, RequestInfo, Response};

const CALLS: usize = 50;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let app = App::open(&dir.path().join("state.redb")).unwrap();

    let ours = TcpListener::bind("127.0.0.1:0").unwrap();
    let ours_addr = ours.local_addr().unwrap();
    let served = app.clone();
    std::thread::spawn(move || gonka_app::serve_abci(ours, served));

    let baseline = tendermint_abci::ServerBuilder::default()
        .bind("127.0.0.1:0", app)
        .unwrap();
    let baseline_addr: SocketAddr = baseline.local_addr().parse().unwrap();
    std::thread::spawn(move || baseline.listen().map_err(|e| e.to_string()));

    println!("one Info + Flush round trip, {CALLS} calls each:");
    for (name, addr) in [
        ("tendermint-abci server (baseline)", baseline_addr),
        ("gonka-app serve_abci", ours_addr),
    ] {
        let mut millis = calls(addr);
        millis.sort_by(f64::total_cmp);
        println!(
            "  {name:<34} p50 {:>7.2} ms   p90 {:>7.2} ms   max {:>7.2} ms",
            millis[CALLS / 2],
            millis[CALLS * 9 / 10],
            millis[CALLS - 1]
        );
    }
}

/// Times `CALLS` synchronous calls to the server at `addr`, in milliseconds.
fn calls(addr: SocketAddr) -> Vec<f64> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let info = encode(request::Value::Info(RequestInfo::default()));
    let flush = encode(request::Value::Flush(Default::default()));
    (0..CALLS)
        .map(|_| {
            let started = Instant::now();
            stream.write_all(&info).unwrap();
            stream.write_all(&flush).unwrap();
            for _ in 0..2 {
                read_delimited::<Response>(&mut reader).unwrap().unwrap();
            }
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

fn encode(value: request::Value) -> Vec<u8> {
    Request { value: Some(value) }.encode_length_delimited_to_vec()
}
