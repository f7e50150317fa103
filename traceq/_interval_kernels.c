/*
 * traceq._interval_kernels: the union of sorted intervals in one pass, for traceq.intervals.merge.
 *
 * merge_sorted(start, end, mask, out_start, out_end) reads the intervals [start[i], end[i]) (int64
 * ns, C-contiguous, one buffer each) that `mask` selects (bytes of 0/1, one per interval; None: all)
 * and writes their union, as traceq.intervals.merge defines it, to out_start / out_end (int64,
 * writable, room for every interval): the components in order, overlapping and touching intervals
 * fused, empty ones (start >= end) dropped.  The selected starts must never decrease; the result is
 *
 *   k >= 0  the number of components written;
 *   -1      a selected start is smaller than the one before (nothing usable written: the caller
 *           merges the unsorted way);
 *   -2      only without a mask: the intervals are already the union (each one its own component,
 *           none empty), and nothing was written, so that the caller can return its input.
 *
 * NumPy's way -- a running maximum of the ends, a comparison with the next start, the positions of
 * the boundaries, then the components gathered -- makes four temporary arrays of the input's size;
 * this pass makes none, and writes only what it returns (an already-merged input: nothing).  The
 * loop runs without the GIL.  traceq.intervals keeps NumPy's way for installs without this module.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

/* The components so far are the first k intervals themselves (no mask, none fused or dropped):
   write them out, since the next step changes that. */
static void start_writing(const int64_t *start, const int64_t *end, int64_t k, int64_t *out_start, int64_t *out_end) {
    memcpy(out_start, start, (size_t)k * sizeof *start);
    memcpy(out_end, end, (size_t)k * sizeof *end);
}

static int64_t merge_pass(const int64_t *start, const int64_t *end, const unsigned char *mask, Py_ssize_t n,
                          int64_t *out_start, int64_t *out_end) {
    int64_t k = 0, reach = 0, previous = INT64_MIN;
    int writing = mask != NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (mask && !mask[i]) continue;
        int64_t a = start[i], b = end[i];
        if (a < previous) return -1;
        previous = a;
        if (a >= b) { /* empty: no component of its own */
            if (!writing) {
                start_writing(start, end, k, out_start, out_end);
                writing = 1;
            }
            continue;
        }
        if (k > 0 && a <= reach) { /* overlaps or touches the open component: fused */
            if (!writing) {
                start_writing(start, end, k, out_start, out_end);
                writing = 1;
            }
            if (b > reach) {
                reach = b;
                out_end[k - 1] = b;
            }
            continue;
        }
        reach = b;
        if (writing) {
            out_start[k] = a;
            out_end[k] = b;
        }
        k++;
    }
    return writing ? k : -2;
}

/* A buffer of `n` items of `itemsize` bytes at least, C-contiguous; False with ValueError set. */
static int long_enough(const Py_buffer *view, Py_ssize_t n, Py_ssize_t itemsize, const char *what) {
    if (view->itemsize != itemsize || view->len < n * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd items of %zd bytes needed", what, n, itemsize);
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(merge_sorted_doc,
             "merge_sorted(start, end, mask, out_start, out_end) -> int\n\n"
             "The union of the intervals [start, end) that mask selects (None: all), whose starts never\n"
             "decrease, written to out_start / out_end; returns the number of components, -1 where a start\n"
             "decreases, or (without a mask) -2 where the intervals are their own union and nothing was written.");

static PyObject *merge_sorted(PyObject *self, PyObject *args) {
    PyObject *start_obj, *end_obj, *mask_obj, *out_start_obj, *out_end_obj;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOO", &start_obj, &end_obj, &mask_obj, &out_start_obj, &out_end_obj)) return NULL;
    Py_buffer views[5];
    PyObject *objects[5] = {start_obj, end_obj, mask_obj, out_start_obj, out_end_obj};
    const int flags[5] = {PyBUF_C_CONTIGUOUS, PyBUF_C_CONTIGUOUS, PyBUF_C_CONTIGUOUS,
                          PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE};
    int held = 0;
    PyObject *out = NULL;
    for (; held < 5; held++) {
        if (objects[held] == Py_None && held == 2) {
            views[held].obj = NULL;
            continue;
        }
        if (PyObject_GetBuffer(objects[held], &views[held], flags[held]) < 0) goto release;
    }
    Py_ssize_t n = views[0].itemsize ? views[0].len / views[0].itemsize : 0;
    if (!long_enough(&views[0], n, 8, "start") || !long_enough(&views[1], n, 8, "end") ||
        (views[2].obj && !long_enough(&views[2], n, 1, "mask")) || !long_enough(&views[3], n, 8, "out_start") ||
        !long_enough(&views[4], n, 8, "out_end"))
        goto release;
    int64_t k;
    Py_BEGIN_ALLOW_THREADS
    k = merge_pass(views[0].buf, views[1].buf, views[2].obj ? views[2].buf : NULL, n, views[3].buf, views[4].buf);
    Py_END_ALLOW_THREADS
    out = PyLong_FromLongLong(k);
release:
    for (int i = 0; i < held; i++)
        if (views[i].obj) PyBuffer_Release(&views[i]);
    return out;
}

static PyMethodDef methods[] = {{"merge_sorted", merge_sorted, METH_VARARGS, merge_sorted_doc}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_interval_kernels",
                                    "The union of sorted intervals in one pass (see traceq.intervals.merge).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__interval_kernels(void) { return PyModule_Create(&module); }
