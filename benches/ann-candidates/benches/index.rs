//! The memory cache store's graph (its own module, compiled here as it is in the router) against
//! an exact scan of the same unit vectors, at 10k and 100k entries of 384 dimensions (and 1M
//! with `ANN_SIZES=1000000`): lookup time as criterion measures it, recall@1 of the store's
//! lookup (16 proposals rescored exactly) against the scan, p50/p99 of single lookups, insert
//! throughput, and the graph's bytes per entry in f32, f16 and i8. One seed, so every run
//! compares the same data. Timings are ratios within one run: the machine is shared.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

#[allow(dead_code, unused_imports)]
#[path = "../../../crates/runtime/src/cache/store/memory/index.rs"]
mod index;

use index::{Graph, Precision};

const DIMS: usize = 384;
const QUERIES: usize = 1_000;
/// What the store asks the graph for (`CANDIDATES * 4`).
const PROPOSED: usize = 16;

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

/// Unit vectors around 1,000 topic centres (the same generator as `candidates`), flat.
fn data(seed: u64, n: usize, centres: &[Vec<f32>]) -> Vec<f32> {
    let mut rng = Rng(seed);
    let mut flat = Vec::with_capacity(n * DIMS);
    for _ in 0..n {
        let c = &centres[(rng.next() % centres.len() as u64) as usize];
        flat.extend(normalise(
            c.iter().map(|x| x + 0.06 * rng.normal()).collect(),
        ));
    }
    flat
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
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

/// The store's lookup: the graph's proposals, scored again on the exact vectors.
fn lookup(graph: &Graph, points: &[f32], q: &[f32]) -> Option<usize> {
    let ids = graph.nearest(q, PROPOSED).expect("search");
    ids.into_iter().map(|id| id as usize).max_by(|a, b| {
        let s = |i: usize| dot(&points[i * DIMS..(i + 1) * DIMS], q);
        s(*a).total_cmp(&s(*b))
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn bench(c: &mut Criterion) {
    let mut rng = Rng(7);
    let centres: Vec<Vec<f32>> = (0..1_000)
        .map(|_| normalise((0..DIMS).map(|_| rng.normal()).collect()))
        .collect();
    let sizes: Vec<usize> = std::env::var("ANN_SIZES")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();

    // `ANN_EF=64,128,256` sweeps the search breadth after one build instead (no criterion).
    let sweep: Vec<usize> = std::env::var("ANN_EF")
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let queries_n: usize = std::env::var("ANN_QUERIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(QUERIES);

    // Bytes per entry of the graph alone, per precision, at 10k entries.
    let sample = data(1, 10_000, &centres);
    let precisions = if sweep.is_empty() {
        vec![Precision::F32, Precision::F16, Precision::I8]
    } else {
        Vec::new()
    };
    for precision in precisions {
        let mut graph = Graph::new(DIMS, precision).expect("graph");
        for (i, p) in sample.chunks_exact(DIMS).enumerate() {
            graph.add(i as u64, p).expect("add");
        }
        let queries = data(2, 200, &centres);
        let hits = queries
            .chunks_exact(DIMS)
            .filter(|q| lookup(&graph, &sample, q) == Some(exact(&sample, q)))
            .count();
        println!(
            "graph {precision:?}: {} bytes per entry at 10k (vector copy {} bytes); recall@1 after rescoring {:.3}",
            graph.memory() / 10_000,
            DIMS * precision.bytes(),
            hits as f64 / 200.0
        );
    }

    for &n in &sizes {
        let points = data(1, n, &centres);
        let queries = data(2, queries_n, &centres);
        let mut graph = Graph::new(DIMS, Precision::F16).expect("graph");
        let started = Instant::now();
        for (i, p) in points.chunks_exact(DIMS).enumerate() {
            graph.add(i as u64, p).expect("add");
        }
        let build = started.elapsed().as_secs_f64();
        let truth: Vec<usize> = queries
            .chunks_exact(DIMS)
            .map(|q| exact(&points, q))
            .collect();
        if !sweep.is_empty() {
            for &ef in &sweep {
                graph.set_breadth(ef);
                let mut times = Vec::with_capacity(queries_n);
                let mut hits = 0;
                for (q, t) in queries.chunks_exact(DIMS).zip(&truth) {
                    let started = Instant::now();
                    let found = lookup(&graph, &points, q);
                    times.push(started.elapsed().as_secs_f64() * 1e6);
                    hits += usize::from(found == Some(*t));
                }
                times.sort_by(f64::total_cmp);
                println!(
                    "n={n} ef={ef}: recall@1 {:.3} ({queries_n} queries); lookup p50 {:.0} µs p99 {:.0} µs",
                    hits as f64 / queries_n as f64,
                    percentile(&times, 0.5),
                    percentile(&times, 0.99),
                );
            }
            continue;
        }
        let mut times = Vec::with_capacity(queries_n);
        let mut hits = 0;
        for (q, t) in queries.chunks_exact(DIMS).zip(&truth) {
            let started = Instant::now();
            let found = lookup(&graph, &points, q);
            times.push(started.elapsed().as_secs_f64() * 1e6);
            hits += usize::from(found == Some(*t));
        }
        times.sort_by(f64::total_cmp);
        let mut scan = Vec::with_capacity(50);
        for q in queries.chunks_exact(DIMS).take(50) {
            let started = Instant::now();
            black_box(exact(&points, q));
            scan.push(started.elapsed().as_secs_f64() * 1e6);
        }
        scan.sort_by(f64::total_cmp);
        println!(
            "n={n}: build {build:.1} s ({:.0} inserts/s, one thread, f16 graph); recall@1 {:.3} \
             ({queries_n} queries); lookup p50 {:.0} µs p99 {:.0} µs; exact scan p50 {:.0} µs; \
             graph {} bytes per entry",
            n as f64 / build,
            hits as f64 / queries_n as f64,
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            percentile(&scan, 0.5),
            graph.memory() / n,
        );

        let mut group = c.benchmark_group(format!("cache_index_{n}"));
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
            b.iter(|| black_box(lookup(&graph, &points, next())))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
