//! The memory cache store's graph (its own module, compiled here as it is in the router) against
//! an exact scan of the same unit vectors of 384 dimensions, on two data sets drawn from fixed
//! seeds, each measured and reported:
//!
//! - `uniform`: directions drawn uniformly on the sphere, HNSW's hardest case (every point's
//!   neighbours are barely nearer than any other point);
//! - `clustered`: a Gaussian mixture, 1,000 random centres with noise of norm about 0.6 around
//!   each (cosine about 0.75 between two points of one centre), nearer to what a sentence
//!   encoder makes of a service's questions;
//! - `topics` (not run unless named): the same centres with noise of norm about 1.2, the set of
//!   the first measurements in docs/benchmarks.md, between the two.
//!
//! Per data set and size: build time (inserts/s), recall@1 of the store's lookup (the graph's
//! proposals rescored on the exact vectors) against the scan for fresh queries drawn like the
//! data, the share of near-duplicate queries (a stored entry plus noise, cosine about 0.92: the
//! paraphrases a cache answers) whose entry is found, p50/p99 of single lookups, the scan's
//! p50 and their ratio, and the graph's bytes per entry. The search breadth is the store's
//! rule (`breadth`, growing with the graph) unless `ANN_EF` sweeps fixed breadths.
//!
//! Environment (all optional):
//! `ANN_SIZES=10000,100000` (sizes), `ANN_DATA=uniform,clustered`, `ANN_EF=64,128,…` (sweep
//! fixed breadths after each build), `ANN_M=16` (connectivity), `ANN_ADD=128`
//! (`ef_construction`), `ANN_PRECISION=f16|f32|i8`, `ANN_QUERIES=1000`, `ANN_PROPOSED=16` (ids
//! rescored per lookup), `ANN_THREADS=1` (threads that build the graph and the exact answers;
//! lookups are always timed on one thread), `ANN_CRITERION=1` (also time both lookups with
//! criterion). Timings are ratios within one run: the machine is shared.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

#[allow(dead_code, unused_imports)]
#[path = "../../../crates/runtime/src/cache/store/memory/index.rs"]
mod index;

use index::{breadth, Graph, Precision, Shape};

const DIMS: usize = 384;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f32 {
        let (a, b) = (self.unit(), self.unit());
        ((-2.0 * a.ln()).sqrt() * (std::f64::consts::TAU * b).cos()) as f32
    }
}

fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= n);
    v
}

#[derive(Clone, Copy, Debug)]
enum Data {
    Uniform,
    Clustered,
    Topics,
}

/// Per-dimension noise around a centre of the clustered set: norm 0.03 × √384 ≈ 0.59.
const SPREAD: f32 = 0.03;

/// And of the topics set: norm 0.06 × √384 ≈ 1.18.
const TOPICS_SPREAD: f32 = 0.06;

/// `n` unit vectors of `data`, flat; `seed` picks the sample, the centres are always the same.
fn draw(data: Data, seed: u64, n: usize) -> Vec<f32> {
    let mut rng = Rng(seed);
    let mut flat = Vec::with_capacity(n * DIMS);
    match data {
        Data::Uniform => {
            for _ in 0..n {
                flat.extend(normalise((0..DIMS).map(|_| rng.normal()).collect()));
            }
        }
        Data::Clustered | Data::Topics => {
            let spread = if matches!(data, Data::Topics) {
                TOPICS_SPREAD
            } else {
                SPREAD
            };
            let mut c = Rng(7);
            let centres: Vec<Vec<f32>> = (0..1_000)
                .map(|_| normalise((0..DIMS).map(|_| c.normal()).collect()))
                .collect();
            for _ in 0..n {
                let c = &centres[(rng.next() % centres.len() as u64) as usize];
                flat.extend(normalise(
                    c.iter().map(|x| x + spread * rng.normal()).collect(),
                ));
            }
        }
    }
    flat
}

/// Cosine between a near-duplicate query and the stored entry it was made from: a paraphrase,
/// the lookups a cache exists to answer.
const NEAR: f32 = 0.92;

/// `n` near-duplicates of entries of `points` (picked by `seed`): each entry plus noise at
/// cosine about [`NEAR`] to it.
fn near(points: &[f32], seed: u64, n: usize) -> Vec<f32> {
    let mut rng = Rng(seed);
    let count = points.len() / DIMS;
    let sigma = ((1.0 / (NEAR * NEAR) - 1.0) / DIMS as f32).sqrt();
    let mut flat = Vec::with_capacity(n * DIMS);
    for _ in 0..n {
        let i = (rng.next() % count as u64) as usize;
        flat.extend(normalise(
            points[i * DIMS..(i + 1) * DIMS]
                .iter()
                .map(|x| x + sigma * rng.normal())
                .collect(),
        ));
    }
    flat
}

/// Eight running sums, so the compiler vectorises it (a fair exact scan).
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0f32; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a
        .chunks_exact(8)
        .remainder()
        .iter()
        .zip(b.chunks_exact(8).remainder())
        .map(|(x, y)| x * y)
        .sum();
    sums.iter().sum::<f32>() + tail
}

fn exact(points: &[f32], q: &[f32]) -> usize {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, p) in points.chunks_exact(DIMS).enumerate() {
        let s = dot(p, q);
        if s > best.1 {
            best = (i, s);
        }
    }
    best.0
}

/// The exact answers of `queries`, on `threads` threads.
fn truth(points: &[f32], queries: &[f32], threads: usize) -> Vec<usize> {
    let rows: Vec<&[f32]> = queries.chunks_exact(DIMS).collect();
    let share = rows.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let parts: Vec<_> = rows
            .chunks(share)
            .map(|chunk| {
                s.spawn(move || chunk.iter().map(|q| exact(points, q)).collect::<Vec<_>>())
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().expect("a scan thread"))
            .collect()
    })
}

/// The store's lookup: the graph's proposals, scored again on the exact vectors.
fn lookup(graph: &Graph, points: &[f32], q: &[f32], proposed: usize) -> Option<usize> {
    let ids = graph.nearest(q, proposed).expect("search");
    ids.into_iter().map(|id| id as usize).max_by(|a, b| {
        let s = |i: usize| dot(&points[i * DIMS..(i + 1) * DIMS], q);
        s(*a).total_cmp(&s(*b))
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn env_list<T: std::str::FromStr>(name: &str, default: &str) -> Vec<T> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn env_one<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// Recall@1 and single-lookup p50/p99 (µs) at the graph's current breadth.
fn measure(
    graph: &Graph,
    points: &[f32],
    queries: &[f32],
    truth: &[usize],
    proposed: usize,
) -> (f64, f64, f64) {
    let mut times = Vec::with_capacity(truth.len());
    let mut hits = 0;
    for (q, t) in queries.chunks_exact(DIMS).zip(truth) {
        let started = Instant::now();
        let found = lookup(graph, points, q, proposed);
        times.push(started.elapsed().as_secs_f64() * 1e6);
        hits += usize::from(found == Some(*t));
    }
    times.sort_by(f64::total_cmp);
    (
        hits as f64 / truth.len() as f64,
        percentile(&times, 0.5),
        percentile(&times, 0.99),
    )
}

fn bench(c: &mut Criterion) {
    let sizes: Vec<usize> = env_list("ANN_SIZES", "10000,100000");
    let data: Vec<Data> = env_list::<String>("ANN_DATA", "uniform,clustered")
        .iter()
        .filter_map(|d| match d.as_str() {
            "uniform" => Some(Data::Uniform),
            "clustered" => Some(Data::Clustered),
            "topics" => Some(Data::Topics),
            _ => None,
        })
        .collect();
    let sweep: Vec<usize> = env_list("ANN_EF", "");
    let queries_n: usize = env_one("ANN_QUERIES", 1_000);
    let proposed: usize = env_one("ANN_PROPOSED", 16);
    let threads: usize = env_one("ANN_THREADS", 1);
    let criterion: bool = env_one("ANN_CRITERION", 0) == 1;
    let precision = match std::env::var("ANN_PRECISION").as_deref() {
        Ok("f32") => Precision::F32,
        Ok("i8") => Precision::I8,
        _ => Precision::F16,
    };
    let shape = Shape {
        precision,
        connectivity: env_one("ANN_M", index::CONNECTIVITY),
        expansion_add: env_one("ANN_ADD", index::EXPANSION_ADD),
    };
    println!(
        "shape {shape:?}; {proposed} ids rescored per lookup; {queries_n} queries; build on {threads} thread(s)"
    );

    for &set in &data {
        for &n in &sizes {
            let points = draw(set, 1, n);
            let queries = draw(set, 2, queries_n);
            let mut graph = Graph::shaped(DIMS, shape).expect("graph");
            let started = Instant::now();
            graph.extend(0, &points, threads).expect("build");
            let build = started.elapsed().as_secs_f64();
            let started = Instant::now();
            let truth = truth(&points, &queries, threads);
            let scan_all = started.elapsed().as_secs_f64();
            let copies = near(&points, 3, queries_n);
            let copies_truth = self::truth(&points, &copies, threads);
            println!(
                "{set:?} n={n}: build {build:.1} s ({:.0} inserts/s on {threads} thread(s)); graph {} bytes per entry; exact answers in {scan_all:.1} s",
                n as f64 / build,
                graph.memory() / n,
            );
            let mut scan = Vec::with_capacity(50);
            for q in queries.chunks_exact(DIMS).take(50) {
                let started = Instant::now();
                black_box(exact(&points, q));
                scan.push(started.elapsed().as_secs_f64() * 1e6);
            }
            scan.sort_by(f64::total_cmp);
            let scan50 = percentile(&scan, 0.5);
            let rule = graph.breadth();
            let breadths: Vec<(usize, bool)> = if sweep.is_empty() {
                vec![(rule, false)]
            } else {
                sweep.iter().map(|&ef| (ef, true)).collect()
            };
            for (ef, fixed) in breadths {
                if fixed {
                    graph.set_breadth(ef);
                }
                let (recall, p50, p99) = measure(&graph, &points, &queries, &truth, proposed);
                let (found, _, _) = measure(&graph, &points, &copies, &copies_truth, proposed);
                println!(
                    "{set:?} n={n} ef={ef}{}: recall@1 {recall:.3}; near-duplicates found {found:.3}; lookup p50 {p50:.0} µs p99 {p99:.0} µs; exact scan p50 {scan50:.0} µs; scan/lookup {:.0}×",
                    if ef == breadth(n) { " (the rule's)" } else { "" },
                    scan50 / p50,
                );
            }
            if criterion {
                let mut group = c.benchmark_group(format!("cache_index_{set:?}_{n}"));
                group.sample_size(10);
                let mut i = 0;
                let mut next = || {
                    i = (i + 1) % queries_n;
                    &queries[i * DIMS..(i + 1) * DIMS]
                };
                group.bench_function("exact_scan", |b| {
                    b.iter(|| black_box(exact(&points, next())))
                });
                group.bench_function("graph_and_rescore", |b| {
                    b.iter(|| black_box(lookup(&graph, &points, next(), proposed)))
                });
                group.finish();
            }
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
