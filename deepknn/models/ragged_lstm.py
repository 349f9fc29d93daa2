"""Stacked (bi)LSTM on a ragged batch: what L.NStep(Bi)LSTM computes, faster on CPU.

`ragged_lstm` takes the link's own parameters (`link.ws`, `link.bs`): nets.RNNEncoder
keeps the link (parameter names and initialisation, so saved models load) and runs its
forward pass through this function.
"""
import chainer
import chainer.functions as F
import numpy as np


class _TimeMajorLayout:
    """Where each token of a ragged batch goes when the batch is sorted by length
    (longest first) and laid out time step by time step.

    The rows of step t are the sequences longer than t, which are a prefix of the
    sorted batch, so an LSTM step updates only `sizes[t]` leading rows.
    """

    def __init__(self, lengths):
        lengths = np.asarray(lengths)
        if lengths.min() < 1:
            raise ValueError('every sequence needs at least one token')
        self.order = np.argsort(-lengths, kind='stable')   # sorted position -> input index
        sorted_lengths = lengths[self.order]
        self.sizes = [int((sorted_lengths > t).sum()) for t in range(sorted_lengths[0])]
        # Row of each (step, sorted sequence) in the inputs concatenated in input order.
        starts = (np.cumsum(lengths) - lengths)[self.order]
        self.rows = np.concatenate([starts[:n] + t for t, n in enumerate(self.sizes)])
        self.step_ends = np.cumsum(self.sizes)[:-1]         # split points between steps

    def to_time_major(self, xs):
        """list of (len_i, D) -> (sum len_i, D): step 0's rows, then step 1's, ..."""
        concatenated = F.concat(xs, axis=0)
        return F.permutate(concatenated, _on_device_of(concatenated, self.rows))

    def to_input_order(self, states):
        """(B, N) rows in sorted order -> rows in the order of the input list."""
        return F.permutate(states, _on_device_of(states, self.order), inv=True)


def _on_device_of(variable, indices):
    """int32 `indices` as an array of the variable's device (numpy or cupy)."""
    return chainer.backend.get_array_module(variable).asarray(indices, dtype=np.int32)


def _stacked_cell_weights(ws, bs):
    """One NStepLSTM cell's eight weights and biases, stacked once per forward pass in
    the gate layout F.lstm reads (per unit: a, i, f, o interleaved).

    NStepLSTM's w0..w3 act on the input and w4..w7 on the hidden state, in the gate
    order i, f, a, o. Returns input weights (4N, I), recurrent weights (4N, N) and
    the two biases summed (4N,).
    """
    def interleave(arrays):
        stacked = F.stack(arrays, axis=1)                   # (N, 4, ...)
        return F.reshape(stacked, (-1,) + stacked.shape[2:])

    order = (2, 0, 1, 3)
    return (interleave([ws[j] for j in order]), interleave([ws[4 + j] for j in order]),
            interleave([bs[j] + bs[4 + j] for j in order]))


def _lstm_direction(gate_inputs, w_recurrent, sizes, reverse):
    """Run one LSTM direction over a time-major ragged batch.

    gate_inputs: per step t, the input projection (sizes[t], 4N) (biases included).
    Returns the hidden states per step, a list of (sizes[t], N), and the final hidden
    state of every sequence (B, N), both in sorted order. Reading left to right, the
    shortest sequences drop off the end of the batch; right to left (`reverse`) they
    join it with zero states at their last token, so each reads only its own tokens.
    """
    batch, n_units = sizes[0], w_recurrent.shape[1]
    xp = chainer.backend.get_array_module(w_recurrent)
    # F.lstm updates the leading rows of the cell state and keeps the others, which
    # is what both a finished and a not yet started sequence needs.
    cell = xp.zeros((batch, n_units), dtype=w_recurrent.dtype)
    hidden, finished, outputs = None, [], [None] * len(sizes)
    for t in (reversed(range(len(sizes))) if reverse else range(len(sizes))):
        gates = gate_inputs[t]
        if hidden is not None:
            if len(hidden) > sizes[t]:    # left to right: keep the final states of the ended
                hidden, ended = F.split_axis(hidden, [sizes[t]], axis=0)
                finished.append(ended)
            recurrent = F.linear(hidden, w_recurrent)
            if len(recurrent) < sizes[t]:  # right to left: new sequences start from h = 0
                recurrent = F.pad(recurrent, ((0, sizes[t] - len(recurrent)), (0, 0)),
                                  'constant')
            gates = gates + recurrent
        cell, hidden = F.lstm(cell, gates)
        outputs[t] = hidden
    return outputs, F.concat([hidden] + finished[::-1], axis=0)


def ragged_lstm(ws, bs, xs, n_directions, dropout):
    """Stacked (bi)LSTM on a ragged batch with the parameters of L.NStepLSTM /
    L.NStepBiLSTM (`link.ws`, `link.bs`), computing what that link computes.

    Faster on CPU than the link: each cell's weights are stacked once per call, the
    input projection of all time steps of a layer is one matrix product, and the
    loop over time does only the recurrent product and the gate nonlinearities, on
    the sequences still running. Dropout (ratio `dropout`, train mode only) is
    applied to the input of every layer but the first, separately per direction, as
    NStepLSTM does. xs: list of (len_i, I) Variables. Returns the final hidden state
    of every cell (layer-major, forward direction first), each (B, N) in input order.
    """
    layout = _TimeMajorLayout([len(x) for x in xs])
    inputs = layout.to_time_major(xs)
    finals, n_layers = [], len(ws) // n_directions
    for layer in range(n_layers):
        outputs = []
        for direction in range(n_directions):
            cell = layer * n_directions + direction
            w_input, w_recurrent, bias = _stacked_cell_weights(ws[cell], bs[cell])
            x = inputs if layer == 0 else F.dropout(inputs, dropout)
            gate_inputs = F.split_axis(F.linear(x, w_input, bias), layout.step_ends, axis=0)
            steps, final = _lstm_direction(gate_inputs, w_recurrent, layout.sizes,
                                           reverse=(direction == 1))
            finals.append(layout.to_input_order(final))
            outputs.append(steps)
        if layer + 1 < n_layers:   # only final states are returned from the last layer
            # (sum len_i, N * directions), time-major like the layer's input
            inputs = F.concat([F.concat(steps, axis=0) for steps in outputs], axis=1)
    return finals
