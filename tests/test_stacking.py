"""The pooled stack of linear and encoder scores (issue 75): standardized inputs per label, one encoder weight
across labels with each label's departure shrunk by a penalty that document-grouped cross-validation chooses,
and a one-sided test at 5% that keeps a moderately informative encoder and drops a useless one. Synthetic
segments: a label drawn from a logistic of two document-independent features, the linear model seeing the first
and the encoder the second."""

import numpy as np
import pytest

from toolkit.tasks.segments.stacking import PENALTIES, fit_pooled_stack, gain_test, out_of_fold_pooled


def segments(seed: int, documents: int, per_document: int = 30, encoder_odds=(2.0,)):
    """Rows of (segment, label) for len(encoder_odds) labels; the encoder's odds per standard deviation per label."""
    rng = np.random.default_rng(seed)
    labels = len(encoder_odds)
    n = documents * per_document * labels
    doc = np.repeat(np.arange(documents), per_document * labels)
    label = np.tile(np.arange(labels), documents * per_document)
    linear, signal = rng.normal(size=n), rng.normal(size=n)
    z = -3.6 + 1.5 * linear + np.log(np.asarray(encoder_odds))[label] * signal
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(int)
    return y, doc, label, linear, signal


def test_the_stack_reads_standardized_scores_per_label_so_a_scale_changes_nothing():
    y, doc, label, linear, signal = segments(0, documents=10, encoder_odds=(2.0, 3.0))
    scaled_signal = np.where(label == 0, 1000 * signal, signal - 7)
    stack = fit_pooled_stack(y, doc, label, linear, signal, 2)
    scaled = fit_pooled_stack(y, doc, label, linear, scaled_signal, 2)
    np.testing.assert_allclose(
        stack.logits(label, linear, signal), scaled.logits(label, linear, scaled_signal), atol=1e-4
    )
    assert stack.penalty == scaled.penalty and stack.penalty in PENALTIES and stack.weight > 0
    for j in range(2):  # the raw weights are the same model over unstandardized scores
        w_x, w_e, bias = stack.raw_weights(j)
        rows = label == j
        np.testing.assert_allclose(
            w_x * linear[rows] + w_e * signal[rows] + bias, stack.logits(label, linear, signal)[rows]
        )
    assert fit_pooled_stack(np.zeros(10, dtype=int), np.arange(10), np.zeros(10, int), np.ones(10), None, 1) is None


def test_a_label_the_encoder_does_not_know_departs_from_the_pooled_weight_when_its_evidence_is_strong():
    # three labels where the encoder doubles the odds per deviation, one where it is noise: 80 documents
    y, doc, label, linear, signal = segments(1, documents=80, encoder_odds=(3.0, 3.0, 3.0, 1.0))
    stack = fit_pooled_stack(y, doc, label, linear, signal, 4)
    weights = stack.weight + stack.departures
    assert min(weights[:3]) > 0.6 and abs(weights[3]) < 0.35


def test_few_documents_shrink_every_label_to_the_pooled_weight():
    # 6 documents: too few to tell the labels apart, so the departures are shrunk to nearly nothing
    y, doc, label, linear, signal = segments(2, documents=6, encoder_odds=(3.0, 3.0, 1.0))
    stack = fit_pooled_stack(y, doc, label, linear, signal, 3)
    assert np.abs(stack.departures).max() < 0.5 * abs(stack.weight)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_encoder_is_kept_when_it_is_moderately_informative_and_dropped_when_it_is_noise(seed):
    # 60 documents of two labels, about 130 positive segments each: where the test's power for odds x2 is near 1.
    y, doc, label, linear, signal = segments(seed, documents=60, encoder_odds=(2.0, 2.0))
    noise = np.random.default_rng(100 + seed).normal(size=len(y))
    alone = out_of_fold_pooled(y, doc, label, linear, None, 2, seed=seed)
    kept = gain_test(y, doc, alone, out_of_fold_pooled(y, doc, label, linear, signal, 2, seed=seed), seed=seed)
    dropped = gain_test(y, doc, alone, out_of_fold_pooled(y, doc, label, linear, noise, 2, seed=seed), seed=seed)
    assert kept["keep"] and kept["p_value"] < 0.05 and kept["gain"] > 0 and kept["documents"] == 60
    assert not dropped["keep"] and dropped["p_value"] >= 0.05
