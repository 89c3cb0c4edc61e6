//! One page of a list query: a range scan that starts at the request's key and stops after
//! [`gonka_proto::query::page::limit`] rows or before the item that would cross
//! [`MAX_BYTES`], whichever comes first. Rows after the page are never read, so no list
//! query costs more than one page however long the list grows.
//!
//! A page key is the part of a row's key after the list's prefix: a client cannot move a
//! scan outside the list it asked for, whatever bytes it sends.

use gonka_proto::query::page::{limit, PageRequest, PageResponse, MAX_BYTES};
use gonka_proto::query::ListQuery;
use prost::Message;

use crate::{Result, StateRead};

/// One page of items and where the list goes on.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    /// The items of this page, in key order.
    pub items: Vec<T>,
    /// The response's `pagination`: the next page's key (empty at the end of the list).
    pub pagination: Option<PageResponse>,
}

/// The budget of one page, spent by one or more [`Pager::scan`]s (a list made of two
/// indexes, such as the work a validator owes, scans both under one budget).
#[derive(Debug)]
pub struct Pager {
    rows_left: usize,
    bytes_left: usize,
    items: usize,
}

impl Pager {
    /// The budget of the page `request` asks for (default and clamped limit).
    pub fn new(request: Option<&PageRequest>) -> Self {
        Self {
            rows_left: usize::try_from(limit(request)).unwrap_or(usize::MAX),
            bytes_left: MAX_BYTES,
            items: 0,
        }
    }

    /// Scans the rows under `prefix` from `prefix ++ start`, turning each into at most one
    /// item with `item(key, value)` (`None`: the row is filtered out, but still counts as
    /// read). Returns where the list goes on, as the key suffix after `prefix` of the first
    /// row not taken, or `None` if the prefix is exhausted.
    pub fn scan<S, T, F>(
        &mut self,
        state: &S,
        prefix: &[u8],
        start: &[u8],
        out: &mut Vec<T>,
        mut item: F,
    ) -> Result<Option<Vec<u8>>>
    where
        S: StateRead + ?Sized,
        T: Message,
        F: FnMut(&[u8], &[u8]) -> Result<Option<T>>,
    {
        let mut from = prefix.to_vec();
        from.extend_from_slice(start);
        // One row more than the budget: whether it exists says if the list goes on.
        let rows = state.range_raw(prefix, &from, self.rows_left.saturating_add(1))?;
        for (key, value) in rows {
            let next = || Ok(Some(key[prefix.len()..].to_vec()));
            if self.rows_left == 0 {
                return next();
            }
            if let Some(item) = item(&key, &value)? {
                let len = item.encoded_len();
                // As a repeated field: one tag byte, the length varint and the message.
                let bytes = 1 + prost::encoding::encoded_len_varint(len as u64) + len;
                if self.items > 0 && bytes > self.bytes_left {
                    return next();
                }
                self.bytes_left = self.bytes_left.saturating_sub(bytes);
                self.items += 1;
                out.push(item);
            }
            self.rows_left -= 1;
        }
        Ok(None)
    }
}

/// One page of the list under `prefix`, each row turned into at most one item by `item`.
pub fn paginate<S, T, F>(
    state: &S,
    prefix: &[u8],
    request: Option<&PageRequest>,
    item: F,
) -> Result<Page<T>>
where
    S: StateRead + ?Sized,
    T: Message,
    F: FnMut(&[u8], &[u8]) -> Result<Option<T>>,
{
    let mut items = Vec::new();
    let start = request.map_or(&[][..], |r| &r.key);
    let next = Pager::new(request).scan(state, prefix, start, &mut items, item)?;
    Ok(Page {
        items,
        pagination: Some(PageResponse {
            next_key: next.unwrap_or_default(),
        }),
    })
}

/// One page of the protobuf values under `prefix`, each decoded as `M` and turned into at
/// most one item by `item(key, value)`.
pub fn paginate_proto<S, M, T, F>(
    state: &S,
    prefix: &[u8],
    request: Option<&PageRequest>,
    mut item: F,
) -> Result<Page<T>>
where
    S: StateRead + ?Sized,
    M: Message + Default,
    T: Message,
    F: FnMut(&[u8], M) -> Result<Option<T>>,
{
    paginate(state, prefix, request, |key, value| {
        item(key, crate::state::decode(key, value)?)
    })
}

/// Every page of the list query `Q` asked with `request` and page size `limit`, answered by
/// a module's router (`route(path, data)`, as `Module::query` takes them): what tests use to
/// check that a list spans its pages without gaps or duplicates. Panics on an error answer
/// or a next key that does not move forward.
pub fn walk_pages<Q: ListQuery>(
    route: impl Fn(&str, &[u8]) -> Option<Result<Vec<u8>>>,
    mut request: Q::Request,
    limit: u64,
) -> Vec<Vec<Q::Item>> {
    let mut pages = Vec::new();
    let mut key = Vec::new();
    loop {
        *Q::page(&mut request) = Some(PageRequest {
            key: key.clone(),
            limit,
        });
        let answer = route(Q::PATH, &request.encode_to_vec())
            .unwrap_or_else(|| panic!("no router answers {}", Q::PATH))
            .unwrap_or_else(|e| panic!("{}: {e}", Q::PATH));
        let response = Q::Response::decode(answer.as_slice()).expect("a valid response");
        let next = Q::next_key(&response).to_vec();
        pages.push(Q::items(response));
        if next.is_empty() {
            return pages;
        }
        assert!(next > key, "{}: next key {next:?} after {key:?}", Q::PATH);
        key = next;
    }
}

/// Asserts that the list query `Q`, asked with `request` through `route`, lists exactly
/// `expected` across its pages, whatever the page size: no gap, no duplicate, no page larger
/// than its limit, and an empty next key only at the end. For modules' tests.
pub fn assert_pages<Q: ListQuery>(
    route: impl Fn(&str, &[u8]) -> Option<Result<Vec<u8>>>,
    request: Q::Request,
    expected: &[Q::Item],
) where
    Q::Request: Clone,
    Q::Item: PartialEq + std::fmt::Debug,
{
    let n = expected.len() as u64;
    for limit in [1, 2, 3, n.saturating_sub(1), n, n + 1, 0] {
        let pages = walk_pages::<Q>(&route, request.clone(), limit);
        let most = super::page::limit(Some(&PageRequest {
            key: Vec::new(),
            limit,
        }));
        for page in &pages {
            assert!(
                page.len() as u64 <= most,
                "{}: a page of {} items with limit {limit}",
                Q::PATH,
                page.len()
            );
        }
        let listed: Vec<&Q::Item> = pages.iter().flatten().collect();
        let expected: Vec<&Q::Item> = expected.iter().collect();
        assert_eq!(listed, expected, "{} with limit {limit}", Q::PATH);
    }
}

#[cfg(test)]
mod tests {
    use gonka_proto::query::page::MAX_LIMIT;

    use super::*;
    use crate::MemoryState;

    fn state(n: usize, value_len: usize) -> MemoryState {
        MemoryState::from_changes(
            (0..n)
                .map(|i| {
                    let key = format!("list/{i:05}").into_bytes();
                    (key, Some(vec![b'x'; value_len]))
                })
                .chain([(b"other/0".to_vec(), Some(b"not listed".to_vec()))])
                .collect(),
        )
    }

    /// Every row's value, as a bytes item.
    fn all_pages(state: &MemoryState, limit: u64) -> Vec<Vec<Vec<u8>>> {
        let mut pages = Vec::new();
        let mut key = Vec::new();
        loop {
            let request = PageRequest { key, limit };
            let page =
                paginate(state, b"list/", Some(&request), |k, _| Ok(Some(k.to_vec()))).unwrap();
            pages.push(page.items);
            key = page.pagination.unwrap().next_key;
            if key.is_empty() {
                return pages;
            }
        }
    }

    #[test]
    fn pages_cover_the_list_without_gaps_or_duplicates() {
        let state = state(25, 1);
        for limit in [1, 7, 10, 25, 26, 1000] {
            let pages = all_pages(&state, limit);
            let keys: Vec<Vec<u8>> = pages.iter().flatten().cloned().collect();
            let expected: Vec<Vec<u8>> = (0..25).map(|i| format!("list/{i:05}").into()).collect();
            assert_eq!(keys, expected, "limit {limit}");
            assert!(pages.iter().all(|p| p.len() as u64 <= limit));
            assert_eq!(pages.len(), 25usize.div_ceil(limit as usize).max(1));
        }
    }

    #[test]
    fn an_empty_list_is_one_empty_last_page() {
        let pages = all_pages(&state(0, 1), 0);
        assert_eq!(pages, vec![Vec::<Vec<u8>>::new()]);
    }

    #[test]
    fn a_limit_above_the_maximum_is_clamped_and_reads_only_one_page() {
        let state = state(MAX_LIMIT as usize + 50, 1);
        state.reset_reads();
        let request = PageRequest {
            key: vec![],
            limit: u64::MAX,
        };
        let page = paginate(&state, b"list/", Some(&request), |_, v| {
            Ok(Some(v.to_vec()))
        })
        .unwrap();
        assert_eq!(page.items.len() as u64, MAX_LIMIT);
        assert!(!page.pagination.unwrap().next_key.is_empty());
        // The page's rows and the one that says the list goes on; nothing after.
        assert_eq!(state.rows_read(), MAX_LIMIT as usize + 1);
    }

    #[test]
    fn a_page_stops_before_the_byte_bound() {
        // 300 rows of 10 KiB: 100 of them would be about 1 MiB.
        let state = state(300, 10 * 1024);
        let request = PageRequest {
            key: vec![],
            limit: MAX_LIMIT,
        };
        let page = paginate(&state, b"list/", Some(&request), |_, v| {
            Ok(Some(v.to_vec()))
        })
        .unwrap();
        let bytes: usize = page.items.iter().map(|i| i.len() + 4).sum();
        assert!(bytes <= MAX_BYTES, "{bytes} bytes");
        assert!(page.items.len() > 90 && page.items.len() < 300);
        let next = page.pagination.unwrap().next_key;
        assert_eq!(next, format!("{:05}", page.items.len()).into_bytes());
    }

    #[test]
    fn filtered_rows_count_against_the_limit() {
        let state = state(10, 1);
        let request = PageRequest {
            key: vec![],
            limit: 4,
        };
        let page = paginate(&state, b"list/", Some(&request), |k, _| {
            Ok(k.ends_with(b"3").then(|| k.to_vec()))
        })
        .unwrap();
        assert_eq!(page.items, [b"list/00003".to_vec()]);
        assert_eq!(page.pagination.unwrap().next_key, b"00004");
    }
}
