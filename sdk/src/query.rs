//! Answering queries: a module's router maps each [`Query`] of the shared contract
//! (`gonka_proto::query`) to its handler.

use gonka_proto::query::Query;
use prost::Message;

use crate::{ErrorCode, Result, SdkError};

/// Dispatches one `abci_query` to the handler of the [`Query`] its path names:
///
/// ```ignore
/// QueryRouter::new(path, data)
///     .on::<bank::Balance>(|r| Ok(QueryBalanceResponse { .. }))
///     .on::<bank::Supply>(|r| ...)
///     .answer()
/// ```
#[derive(Debug)]
pub struct QueryRouter<'a> {
    path: &'a str,
    data: &'a [u8],
    answer: Option<Result<Vec<u8>>>,
}

impl<'a> QueryRouter<'a> {
    /// A router for the query `path` with protobuf request `data`.
    pub fn new(path: &'a str, data: &'a [u8]) -> Self {
        Self {
            path,
            data,
            answer: None,
        }
    }

    /// Answers with `handler` if the path is `Q`'s: decodes the request (a malformed one is
    /// an `sdk` decode error naming the expected type) and encodes the response.
    pub fn on<Q: Query>(mut self, handler: impl FnOnce(Q::Request) -> Result<Q::Response>) -> Self {
        if self.answer.is_none() && self.path == Q::PATH {
            let request = Q::Request::decode(self.data).map_err(|e| {
                SdkError::Decode.err(format!(
                    "query data of {} is not a valid {}: {e}",
                    Q::PATH,
                    std::any::type_name::<Q::Request>()
                ))
            });
            self.answer = Some(request.and_then(handler).map(|r| r.encode_to_vec()));
        }
        self
    }

    /// The answer, or `None` if no handler took the path (another module's).
    pub fn answer(self) -> Option<Result<Vec<u8>>> {
        self.answer
    }
}
