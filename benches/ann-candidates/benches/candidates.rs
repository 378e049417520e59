//! usearch, hnsw_rs and instant-distance on one data set: build time, recall@1 against an
//! exact scan, and lookup time (criterion) at equal graph parameters (M = 16, ef_construction
//! = 128, ef_search = 64). The data is clustered like sentence embeddings (unit vectors around
//! 1,000 topic centres), not uniform noise, and drawn from a fixed seed.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};

const DIMS: usize = 384;
const N: usize = 20_000;
const QUERIES: usize = 500;
const M: usize = 16;
const EF_ADD: usize = 128;
const EF_SEARCH: usize = 64;

/// splitmix64, with Box–Muller for normal deviates: deterministic on every platform.
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

fn data(seed: u64, n: usize, centres: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let c = &centres[(rng.next() % centres.len() as u64) as usize];
            normalise(c.iter().map(|x| x + 0.06 * rng.normal()).collect())
        })
        .collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn exact(points: &[Vec<f32>], q: &[f32]) -> usize {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, p) in points.iter().enumerate() {
        let s = dot(p, q);
        if s > best.1 {
            best = (i, s);
        }
    }
    best.0
}

#[derive(Clone)]
struct P(Vec<f32>);

impl instant_distance::Point for P {
    fn distance(&self, other: &Self) -> f32 {
        1.0 - dot(&self.0, &other.0)
    }
}

fn bench(c: &mut Criterion) {
    let mut rng = Rng(7);
    let centres: Vec<Vec<f32>> = (0..1_000)
        .map(|_| normalise((0..DIMS).map(|_| rng.normal()).collect()))
        .collect();
    let points = data(1, N, &centres);
    let queries = data(2, QUERIES, &centres);
    let truth: Vec<usize> = queries.iter().map(|q| exact(&points, q)).collect();
    let recall = |found: &dyn Fn(&[f32]) -> usize| {
        let hits = queries
            .iter()
            .zip(&truth)
            .filter(|(q, t)| found(q) == **t)
            .count();
        hits as f64 / QUERIES as f64
    };

    // usearch
    let started = Instant::now();
    let options = usearch::IndexOptions {
        dimensions: DIMS,
        metric: usearch::MetricKind::IP,
        quantization: usearch::ScalarKind::F32,
        connectivity: M,
        expansion_add: EF_ADD,
        expansion_search: EF_SEARCH,
        multi: false,
    };
    let us = usearch::Index::new(&options).expect("usearch index");
    us.reserve(N).expect("reserve");
    for (i, p) in points.iter().enumerate() {
        us.add(i as u64, p).expect("add");
    }
    let us_build = started.elapsed();
    let us_recall = recall(&|q| us.search(q, 1).expect("search").keys[0] as usize);
    let us_bytes = us.memory_usage();

    // hnsw_rs
    let started = Instant::now();
    let hn = hnsw_rs::hnsw::Hnsw::<f32, anndists::dist::DistDot>::new(
        M,
        N,
        16,
        EF_ADD,
        anndists::dist::DistDot {},
    );
    for (i, p) in points.iter().enumerate() {
        hn.insert_slice((p, i));
    }
    let hn_build = started.elapsed();
    let hn_recall = recall(&|q| hn.search(q, 1, EF_SEARCH)[0].d_id);

    // instant-distance: built once from the whole set (no insert after build, no removal).
    let started = Instant::now();
    let ids: Vec<usize> = (0..N).collect();
    let id = instant_distance::Builder::default()
        .ef_construction(EF_ADD)
        .ef_search(EF_SEARCH)
        .seed(3)
        .build(points.iter().cloned().map(P).collect(), ids);
    let id_build = started.elapsed();
    let id_recall = recall(&|q| {
        let mut search = instant_distance::Search::default();
        let first = *id
            .search(&P(q.to_vec()), &mut search)
            .next()
            .expect("a neighbour")
            .value;
        first
    });

    println!(
        "candidates, {N} x {DIMS}: build s (usearch one thread, hnsw_rs one thread, instant-distance all cores) \
         {:.2} / {:.2} / {:.2}; recall@1 {us_recall:.3} / {hn_recall:.3} / {id_recall:.3}; usearch bytes/entry {}",
        us_build.as_secs_f64(),
        hn_build.as_secs_f64(),
        id_build.as_secs_f64(),
        us_bytes / N,
    );

    let mut group = c.benchmark_group("ann_candidates_20k");
    group.sample_size(20);
    let mut i = 0;
    let mut next = || {
        i = (i + 1) % QUERIES;
        &queries[i]
    };
    group.bench_function("exact_scan", |b| {
        b.iter(|| black_box(exact(&points, next())))
    });
    group.bench_function("usearch", |b| {
        b.iter(|| black_box(us.search(next(), 4).expect("search").keys.len()))
    });
    group.bench_function("hnsw_rs", |b| {
        b.iter(|| black_box(hn.search(next(), 4, EF_SEARCH).len()))
    });
    group.bench_function("instant_distance", |b| {
        b.iter(|| {
            let mut search = instant_distance::Search::default();
            black_box(id.search(&P(next().to_vec()), &mut search).take(4).count())
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
