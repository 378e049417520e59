//! The HNSW graph of one large scope of the memory cache store, on `usearch`: which entries lie
//! near a vector, in time that grows with the logarithm of the scope's size rather than with it.
//!
//! The graph only proposes candidates. The store scores them again on the exact `f32` vectors
//! it keeps, so a hit's similarity is what an exact scan would report, and the graph may hold
//! its vectors at lower precision ([`Precision`]) to save memory. Removed entries leave the
//! graph at once (usearch reuses their slots), so a lookup never proposes a deleted id.
//!
//! A fixed search breadth finds the true nearest entry less often as a graph grows (at 64,
//! every query of 100,000 entries but four in five at 1,000,000, docs/benchmarks.md), so the
//! breadth follows the graph's size ([`breadth`]) as entries come and go.

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

/// Neighbours kept per node (HNSW's `M`; twice as many on the bottom layer).
pub const CONNECTIVITY: usize = 16;

/// Candidates explored while inserting (HNSW's `ef_construction`).
pub const EXPANSION_ADD: usize = 128;

/// Candidates explored while searching a small graph (HNSW's `ef`), the least [`breadth`] gives.
pub const EXPANSION_SEARCH: usize = 64;

/// Entries per candidate of search breadth once a graph outgrows [`EXPANSION_SEARCH`].
pub const ENTRIES_PER_CANDIDATE: usize = 4_096;

/// The most candidates a search explores, however large the graph.
pub const MAX_BREADTH: usize = 1_024;

/// The search breadth for a graph of `entries`: [`EXPANSION_SEARCH`] up to
/// 64 × [`ENTRIES_PER_CANDIDATE`] entries (262,144), then one candidate per
/// [`ENTRIES_PER_CANDIDATE`] entries rounded up to a power of two (128 to 524,288 entries, 256
/// to 1,048,576), at most [`MAX_BREADTH`]. The search's cost grows with the breadth, so a
/// lookup in a million entries costs about what a fixed breadth would cost in a graph four
/// times as dense; powers of two keep the setting from changing on every insert. At a million
/// clustered entries 256 finds the exact nearest entry for 0.987 of queries within a 1 ms p99
/// on one core, where 512 finds 0.994 past it (docs/benchmarks.md).
pub fn breadth(entries: usize) -> usize {
    breadth_at(entries, ENTRIES_PER_CANDIDATE)
}

/// [`breadth`] with `per_candidate` entries per candidate.
fn breadth_at(entries: usize, per_candidate: usize) -> usize {
    entries
        .div_ceil(per_candidate.max(1))
        .clamp(EXPANSION_SEARCH, MAX_BREADTH)
        .next_power_of_two()
}

/// How a graph is built: its vectors' precision, its neighbours per node and the breadth of
/// the search that links a new node. The store uses [`Shape::default`]; the index benchmark
/// builds others to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub precision: Precision,
    pub connectivity: usize,
    pub expansion_add: usize,
}

impl Default for Shape {
    fn default() -> Shape {
        Shape {
            precision: Precision::F16,
            connectivity: CONNECTIVITY,
            expansion_add: EXPANSION_ADD,
        }
    }
}

/// How the graph stores its copy of each vector. Lower precision only changes which entries are
/// proposed, never the score of one (the store scores the exact vector).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    F32,
    F16,
    I8,
}

impl Precision {
    /// Bytes per dimension of the graph's copy.
    pub fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F16 => 2,
            Precision::I8 => 1,
        }
    }

    fn scalar(self) -> ScalarKind {
        match self {
            Precision::F32 => ScalarKind::F32,
            Precision::F16 => ScalarKind::F16,
            Precision::I8 => ScalarKind::I8,
        }
    }
}

/// A failure inside the index library (an allocation, a vector of the wrong length).
#[derive(Debug, thiserror::Error)]
#[error("vector index: {0}")]
pub struct IndexError(String);

fn fail(err: impl std::fmt::Display) -> IndexError {
    IndexError(err.to_string())
}

/// The library takes file names as UTF-8 text.
fn utf8(path: &std::path::Path) -> Result<String, IndexError> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| IndexError(format!("{} is not a UTF-8 file name", path.display())))
}

/// An HNSW graph of unit vectors of one length, keyed by entry id, ranked by inner product.
pub struct Graph {
    index: Index,
    dims: usize,
    /// The search breadth in force: [`breadth`] of the size, unless [`Graph::set_breadth`] fixed it.
    ef: usize,
    fixed: bool,
    /// [`ENTRIES_PER_CANDIDATE`], or fewer in tests so a small graph is past the first step.
    per_candidate: usize,
    /// The library's account of its memory ([`Graph::memory`]) when last asked, and the size and
    /// capacity it was asked at: [`Graph::reserved`] asks again only when they moved enough.
    measured: Measured,
    /// What one more entry adds to a graph whose capacity holds it: its copy of the vector,
    /// its bottom-layer links (twice the connectivity, four bytes each, and their count) and
    /// its key and level. The upper layers hold one node in `connectivity`, left out.
    node_bytes: usize,
}

#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    bytes: usize,
    size: usize,
    capacity: usize,
}

impl Graph {
    /// A graph of the store's [`Shape`] with vectors at `precision`.
    pub fn new(dims: usize, precision: Precision) -> Result<Graph, IndexError> {
        Graph::shaped(
            dims,
            Shape {
                precision,
                ..Shape::default()
            },
        )
    }

    pub fn shaped(dims: usize, shape: Shape) -> Result<Graph, IndexError> {
        let options = IndexOptions {
            dimensions: dims,
            metric: MetricKind::IP,
            quantization: shape.precision.scalar(),
            connectivity: shape.connectivity,
            expansion_add: shape.expansion_add,
            expansion_search: EXPANSION_SEARCH,
            multi: false,
        };
        let index = Index::new(&options).map_err(fail)?;
        index.reserve(64).map_err(fail)?;
        Ok(Graph {
            index,
            dims,
            ef: EXPANSION_SEARCH,
            fixed: false,
            per_candidate: ENTRIES_PER_CANDIDATE,
            measured: Measured::default(),
            node_bytes: dims * shape.precision.bytes() + 2 * shape.connectivity * 4 + 4 + 10,
        })
    }

    /// The length of the vectors it holds.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.index.size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the library holds for the graph (vectors, links, slack of the reserved capacity).
    pub fn memory(&self) -> usize {
        self.index.memory_usage()
    }

    /// The bytes the graph holds, as the store counts them against `max_bytes`: the library's
    /// own account ([`Graph::memory`]: vectors, links, and the slack of a capacity doubled
    /// ahead of need, up to half the slots), taken again whenever the capacity changed or the
    /// size moved by an eighth (at least 64 entries) since it was last taken, and in between
    /// that account plus one node's bytes for each entry added (the capacity, and so its
    /// slack, is unchanged until the next account). The account walks every node, so taking it
    /// on every insert would cost a large scope a walk per insert; this way it costs about
    /// eight node visits per insert.
    pub fn reserved(&mut self) -> usize {
        let (size, capacity) = (self.index.size(), self.index.capacity());
        let last = self.measured;
        if capacity != last.capacity || size.abs_diff(last.size) >= (last.size / 8).max(64) {
            self.measured = Measured {
                bytes: self.memory(),
                size,
                capacity,
            };
            return self.measured.bytes;
        }
        last.bytes + size.saturating_sub(last.size) * self.node_bytes
    }

    /// Adds `vector` under `id` (an id held already is replaced).
    pub fn add(&mut self, id: u64, vector: &[f32]) -> Result<(), IndexError> {
        if vector.len() != self.dims {
            return Err(IndexError(format!(
                "a vector of {} dimensions in a graph of {}",
                vector.len(),
                self.dims
            )));
        }
        if self.index.contains(id) {
            self.index.remove(id).map_err(fail)?;
        }
        // Removed entries' slots are reused first; grow by doubling only when none is free.
        if self.index.size() >= self.index.capacity() {
            let capacity = self.index.capacity().max(32) * 2;
            self.index.reserve(capacity).map_err(fail)?;
        }
        self.index.add(id, vector).map_err(fail)?;
        self.follow_size();
        Ok(())
    }

    /// Adds the vectors of `flat` (`dims` values each) under ids `first`, `first + 1`, … on
    /// `threads` threads at once (usearch links concurrent inserts safely): a graph of a million
    /// entries in minutes rather than most of an hour. The ids must be new to the graph.
    pub fn extend(&mut self, first: u64, flat: &[f32], threads: usize) -> Result<(), IndexError> {
        if !flat.len().is_multiple_of(self.dims) {
            return Err(IndexError(format!(
                "{} values are no whole number of {}-dimension vectors",
                flat.len(),
                self.dims
            )));
        }
        let threads = threads.max(1);
        let wanted = self.index.size() + flat.len() / self.dims;
        self.index
            .reserve_capacity_and_threads(wanted.max(self.index.capacity()), threads)
            .map_err(fail)?;
        let rows: Vec<&[f32]> = flat.chunks_exact(self.dims).collect();
        let share = rows.len().div_ceil(threads).max(1);
        let index = &self.index;
        let outcomes: Vec<Result<(), IndexError>> = std::thread::scope(|scope| {
            let workers: Vec<_> = rows
                .chunks(share)
                .enumerate()
                .map(|(part, chunk)| {
                    let start = first + (part * share) as u64;
                    scope.spawn(move || {
                        for (offset, row) in chunk.iter().enumerate() {
                            index.add(start + offset as u64, row).map_err(fail)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join()
                        .unwrap_or_else(|_| Err(IndexError("an insert thread panicked".into())))
                })
                .collect()
        });
        self.follow_size();
        outcomes.into_iter().collect()
    }

    /// Removes `id`; from now on no search proposes it.
    pub fn remove(&mut self, id: u64) -> Result<(), IndexError> {
        self.index.remove(id).map_err(fail)?;
        self.follow_size();
        Ok(())
    }

    /// Explores `ef` candidates per search whatever the size, instead of [`breadth`]'s: recall
    /// against time (the index benchmark sweeps it).
    pub fn set_breadth(&mut self, ef: usize) {
        self.fixed = true;
        self.ef = ef;
        self.index.change_expansion_search(ef);
    }

    /// The candidates a search explores now.
    pub fn breadth(&self) -> usize {
        self.ef
    }

    /// Keeps the search breadth at [`breadth`] of the size (a write of one setting, only when
    /// the size crosses a power of two of the rule).
    fn follow_size(&mut self) {
        let ef = breadth_at(self.index.size(), self.per_candidate);
        if !self.fixed && ef != self.ef {
            self.ef = ef;
            self.index.change_expansion_search(ef);
        }
    }

    /// Writes the graph (vectors, links, ids) to `path`, to be read back by [`Graph::load`]: a
    /// graph of a million entries takes most of an hour to build on a loaded machine and
    /// seconds to read, so the index benchmark builds it once and times its lookups later.
    pub fn save(&self, path: &std::path::Path) -> Result<(), IndexError> {
        self.index.save(&utf8(path)?).map_err(fail)
    }

    /// A graph of `shape` read from a file [`Graph::save`] wrote, its breadth following its
    /// size as a built one's does.
    pub fn load(path: &std::path::Path, dims: usize, shape: Shape) -> Result<Graph, IndexError> {
        let mut graph = Graph::shaped(dims, shape)?;
        graph.index.load(&utf8(path)?).map_err(fail)?;
        if graph.index.dimensions() != dims {
            return Err(IndexError(format!(
                "{} holds vectors of {} dimensions, not {dims}",
                path.display(),
                graph.index.dimensions()
            )));
        }
        // The file holds the graph, not the search setting: set the breadth afresh.
        graph.ef = breadth_at(graph.index.size(), graph.per_candidate);
        graph.index.change_expansion_search(graph.ef);
        Ok(graph)
    }

    /// Up to `count` ids near `vector`, nearest first (approximately: an HNSW search).
    pub fn nearest(&self, vector: &[f32], count: usize) -> Result<Vec<u64>, IndexError> {
        if vector.len() != self.dims || self.index.size() == 0 {
            return Ok(Vec::new());
        }
        Ok(self.index.search(vector, count).map_err(fail)?.keys)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unit(v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        v.into_iter().map(|x| x / n).collect()
    }

    fn exact(points: &[Vec<f32>], live: &[bool], q: &[f32]) -> Option<u64> {
        points
            .iter()
            .enumerate()
            .filter(|(i, _)| live[*i])
            .map(|(i, p)| (i as u64, p.iter().zip(q).map(|(a, b)| a * b).sum::<f32>()))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }

    fn vectors(dims: usize, n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Vec<f32>>> {
        prop::collection::vec(prop::collection::vec(-1.0f32..1.0, dims), n)
            .prop_map(|vs| vs.into_iter().map(unit).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// On sets of up to 300 random 16-dimensional vectors, some removed, the best of the
        /// four ids the graph proposes (as the store rescores them) is the exact scan's answer
        /// for every query, in full and half precision: recall@1 = 1 at these sizes. A removed
        /// id never comes back.
        #[test]
        fn the_graph_answers_as_an_exact_scan_and_never_with_a_removed_id(
            points in vectors(16, 1..300),
            queries in vectors(16, 1..8),
            removed in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
            precision in prop::sample::select(vec![Precision::F32, Precision::F16]),
        ) {
            let mut graph = Graph::new(16, precision).map_err(|e| TestCaseError::fail(e.to_string()))?;
            for (i, p) in points.iter().enumerate() {
                graph.add(i as u64, p).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            let mut live = vec![true; points.len()];
            for r in &removed {
                let i = r.index(points.len());
                live[i] = false;
                graph.remove(i as u64).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            prop_assert_eq!(graph.len(), live.iter().filter(|l| **l).count());
            for q in &queries {
                let found = graph.nearest(q, 4).map_err(|e| TestCaseError::fail(e.to_string()))?;
                for id in &found {
                    prop_assert!(live[*id as usize], "removed id {} proposed", id);
                }
                let truth = exact(&points, &live, q);
                let best = found
                    .iter()
                    .max_by(|a, b| {
                        let s = |i: u64| points[i as usize].iter().zip(q.iter()).map(|(x, y)| x * y).sum::<f32>();
                        s(**a).total_cmp(&s(**b))
                    })
                    .copied();
                prop_assert_eq!(best, truth);
            }
        }
    }

    /// `n` seeded unit vectors of `dims` dimensions, uniform on the sphere (normal draws by
    /// Box–Muller from a splitmix64 stream), so no two are near-identical; the store's tests
    /// draw theirs here too.
    pub(crate) fn sphere(seed: u64, n: usize, dims: usize) -> Vec<Vec<f32>> {
        let mut state = seed;
        let mut uniform = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 + 1e-12
        };
        (0..n)
            .map(|_| {
                unit(
                    (0..dims)
                        .map(|_| {
                            let (a, b) = (uniform(), uniform());
                            ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
                        })
                        .collect(),
                )
            })
            .collect()
    }

    /// Share of `queries` whose exact nearest point (`truth`) is the best of the 16 ids the
    /// graph proposes (the store's lookup), at the graph's breadth.
    fn recall(graph: &Graph, points: &[Vec<f32>], queries: &[Vec<f32>], truth: &[u64]) -> f64 {
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let found = queries
            .iter()
            .zip(truth)
            .filter(|(q, t)| {
                let best = graph
                    .nearest(q, 16)
                    .expect("search")
                    .into_iter()
                    .max_by(|a, b| {
                        dot(&points[*a as usize], q).total_cmp(&dot(&points[*b as usize], q))
                    });
                best == Some(**t)
            })
            .count();
        found as f64 / queries.len() as f64
    }

    #[test]
    fn the_breadth_follows_the_rule_as_the_graph_grows_and_shrinks() {
        assert_eq!(breadth(0), EXPANSION_SEARCH);
        assert_eq!(breadth(262_144), 64);
        assert_eq!(breadth(262_145), 128);
        assert_eq!(breadth(1_000_000), 256);
        assert_eq!(breadth(1_048_577), 512);
        assert_eq!(breadth(1 << 30), MAX_BREADTH);
        let mut graph = Graph::new(2, Precision::F32).expect("graph");
        assert_eq!(graph.breadth(), EXPANSION_SEARCH);
        graph.set_breadth(300);
        graph.add(1, &[1.0, 0.0]).expect("add");
        assert_eq!(graph.breadth(), 300, "a fixed breadth stays");
    }

    /// A graph whose breadth follows its size (here one candidate per 64 entries, so that
    /// 20,000 entries are past the first steps of the rule: 512 candidates) on a seeded set
    /// that is hard for HNSW (uniform directions in 64 dimensions) finds the exact nearest entry
    /// for clearly more queries than the same graph at the small-graph breadth. Were the
    /// breadth not to follow the size, both would search at [`EXPANSION_SEARCH`] alike.
    #[test]
    fn a_graph_searches_wider_as_it_grows_and_finds_more_nearest_entries() {
        let (n, dims) = (20_000, 64);
        let points = sphere(1, n, dims);
        let queries = sphere(2, 300, dims);
        let mut graph = Graph::new(dims, Precision::F16).expect("graph");
        graph.per_candidate = 64;
        let flat: Vec<f32> = points.iter().flatten().copied().collect();
        graph.extend(0, &flat, 2).expect("build");
        assert_eq!(graph.len(), n);
        assert_eq!(graph.breadth(), 512);
        let live = vec![true; n];
        let truth: Vec<u64> = queries
            .iter()
            .filter_map(|q| exact(&points, &live, q))
            .collect();
        let grown = recall(&graph, &points, &queries, &truth);
        graph.set_breadth(EXPANSION_SEARCH);
        let small = recall(&graph, &points, &queries, &truth);
        eprintln!("recall@1 at {n}: {grown:.3} at 512, {small:.3} at {EXPANSION_SEARCH}");
        assert!(grown >= 0.95, "recall@1 {grown} at the grown breadth");
        assert!(
            grown >= small + 0.05,
            "the grown breadth found {grown}, the small one {small}"
        );
        // Removing entries shrinks the breadth again.
        for id in 0..19_000 {
            graph.remove(id).expect("remove");
        }
        graph.fixed = false;
        graph.follow_size();
        assert_eq!(graph.breadth(), breadth_at(1_000, 64));
    }

    /// A saved graph read back holds the same entries and proposes the same ids for every
    /// query, searches at its size's breadth, and a graph of another length is refused.
    #[test]
    fn a_saved_graph_reads_back_with_the_same_answers() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("graph.usearch");
        let points = sphere(3, 2_000, 32);
        let queries = sphere(4, 50, 32);
        let shape = Shape {
            precision: Precision::I8,
            ..Shape::default()
        };
        let mut graph = Graph::shaped(32, shape).expect("graph");
        let flat: Vec<f32> = points.iter().flatten().copied().collect();
        graph.extend(0, &flat, 2).expect("build");
        graph.remove(7).expect("remove");
        graph.save(&path).expect("save");
        let read = Graph::load(&path, 32, shape).expect("load");
        assert_eq!(read.len(), graph.len());
        assert_eq!(read.breadth(), breadth(graph.len()));
        for q in &queries {
            assert_eq!(
                read.nearest(q, 16).expect("search"),
                graph.nearest(q, 16).expect("search")
            );
        }
        assert!(!read.nearest(&points[7], 16).expect("search").contains(&7));
        assert!(Graph::load(&path, 16, shape).is_err());
        assert!(Graph::load(&dir.path().join("absent"), 32, shape).is_err());
    }

    #[test]
    fn a_vector_of_another_length_is_refused_and_finds_nothing() {
        let mut graph = Graph::new(4, Precision::F32).expect("graph");
        assert!(graph.add(1, &[1.0, 0.0]).is_err());
        graph.add(1, &[1.0, 0.0, 0.0, 0.0]).expect("add");
        assert_eq!(
            graph.nearest(&[1.0, 0.0], 4).expect("search"),
            Vec::<u64>::new()
        );
        assert_eq!(
            graph.nearest(&[1.0, 0.0, 0.0, 0.0], 4).expect("search"),
            vec![1]
        );
    }

    #[test]
    fn it_grows_past_its_first_capacity_and_reuses_removed_slots() {
        let mut graph = Graph::new(2, Precision::F32).expect("graph");
        for i in 0..1_000u64 {
            let a = i as f32 * 0.006;
            graph.add(i, &[a.cos(), a.sin()]).expect("add");
        }
        assert_eq!(graph.len(), 1_000);
        for i in 0..1_000u64 {
            graph.remove(i).expect("remove");
        }
        assert!(graph.is_empty());
        assert_eq!(
            graph.nearest(&[1.0, 0.0], 4).expect("search"),
            Vec::<u64>::new()
        );
        let capacity = graph.index.capacity();
        for i in 0..1_000u64 {
            let a = i as f32 * 0.006;
            graph.add(10_000 + i, &[a.cos(), a.sin()]).expect("add");
        }
        assert_eq!(graph.nearest(&[1.0, 0.0], 1).expect("search"), vec![10_000]);
        assert_eq!(
            graph.index.capacity(),
            capacity,
            "the freed slots were reused"
        );
    }
}
