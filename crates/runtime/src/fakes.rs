//! A model runtime with scripted answers, shared by the runtime's unit tests and its integration
//! tests (`cfg(test)`, or the `fakes` feature the crate's own dev-dependency turns on).
//!
//! It lives here rather than in the test kit: the unit tests are built into a copy of this crate
//! of their own, and a fake from the test kit would implement the other copy's [`ModelSignals`],
//! which the pipeline under test does not take.

use std::sync::{Mutex, PoisonError};

use src_compiler::eval::{ModelCall, ModelKind, ModelResult};
use src_compiler::hir::{CheckedPolicy, EncoderId, LabelId};
use src_dsl::Diagnostic;

use crate::hooks::{BoxFuture, Embedding, ModelSignals, SignalError};

/// A model runtime with fixed answers, which records the models it was asked to run.
pub struct Scripted {
    /// The label every classifier answers.
    pub label: u32,
    /// What every guard answers.
    pub guard: f64,
    /// Every `compute` fails.
    pub fail: bool,
    /// What `embed` answers (`None`: it fails).
    pub embedding: Option<Vec<f32>>,
    pub asked: Mutex<Vec<String>>,
}

impl Default for Scripted {
    fn default() -> Self {
        Scripted {
            label: 0,
            guard: 0.0,
            fail: false,
            embedding: Some(vec![1.0, 0.0]),
            asked: Mutex::new(Vec::new()),
        }
    }
}

impl Scripted {
    /// The models asked so far (encoders as `embed:NAME`), in the order they were asked.
    pub fn asked(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn note(&self, name: &str) {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(name.to_owned());
    }
}

impl ModelSignals for Scripted {
    fn prepare(&self, _policy: &CheckedPolicy) -> Vec<Diagnostic> {
        Vec::new()
    }

    fn compute<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        calls: &'a [ModelCall],
    ) -> BoxFuture<'a, Result<Vec<ModelResult>, SignalError>> {
        let results = calls
            .iter()
            .map(|call| match call.model {
                ModelKind::Classifier(c) => {
                    self.note(&policy.classifiers[c.index()].name);
                    ModelResult::Class {
                        label: LabelId(self.label),
                        confidence: 0.9,
                    }
                }
                ModelKind::Guard(g) => {
                    self.note(&policy.guards[g.index()].name);
                    ModelResult::Score(self.guard)
                }
                ModelKind::Detector(d) => {
                    self.note(&policy.detectors[d.index()].name);
                    ModelResult::Score(0.0)
                }
                ModelKind::Similarity(e) => {
                    self.note(&policy.encoders[e.index()].name);
                    ModelResult::Score(0.0)
                }
            })
            .collect();
        let answer = if self.fail {
            Err(SignalError {
                signal: "all".into(),
                message: "model runtime down".into(),
            })
        } else {
            Ok(results)
        };
        Box::pin(std::future::ready(answer))
    }

    fn embed<'a>(
        &'a self,
        policy: &'a CheckedPolicy,
        encoder: EncoderId,
        _text: &'a str,
        _scope: &'a str,
    ) -> BoxFuture<'a, Result<Embedding, SignalError>> {
        self.note(&format!("embed:{}", policy.encoders[encoder.index()].name));
        let answer = match &self.embedding {
            Some(vector) => Ok(Embedding {
                vector: vector.clone(),
                model: "fake-encoder".into(),
            }),
            None => Err(SignalError {
                signal: "encoder".into(),
                message: "encoder down".into(),
            }),
        };
        Box::pin(std::future::ready(answer))
    }
}
