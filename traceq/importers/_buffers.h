/*
 * traceq/importers/_buffers.h: output memory of the compiled readers (kineto/_scanner.c, nsys/_column_reader.c).
 *
 * A reader writes columns into malloc'd buffers and hands them to Python without a copy as Buffer
 * objects (read through the buffer protocol, so pyarrow and polars wrap them in place).  When
 * Python lets a Buffer go, its memory goes back to a small pool that the reader's next call takes
 * from: a call's columns are megabytes, and fresh memory from the system costs a page fault and a
 * page clearing per 4 KiB (several microseconds each on a virtual machine), while freed memory
 * left to malloc may stay in a thread's arena unused.  The pool is only touched with the GIL held
 * (pool_take before a call lets the GIL go, pool_give from the Buffer's dealloc).
 *
 * Include once per module, after Python.h, with BUFFER_TYPE_NAME and BUFFER_DOC defined.
 */
#ifndef TRACEQ_BUFFERS_H
#define TRACEQ_BUFFERS_H

#include <stdlib.h>

#define POOL_SLOTS 128
#define POOL_MAX_BYTES ((size_t)160 << 20)

static struct {
    void *data;
    size_t cap;
} pool[POOL_SLOTS];
static int pooled;
static size_t pooled_bytes;
static int pool_closed; /* after pool_trim() until the next pool_take(): buffers are freed, not kept */

/* At least `size` bytes (the smallest pooled buffer that is large enough, else fresh memory);
   *cap is what the buffer holds. */
static void *pool_take(size_t size, size_t *cap) {
    int best = -1;
    pool_closed = 0;
    for (int i = 0; i < pooled; i++)
        if (pool[i].cap >= size && (best < 0 || pool[i].cap < pool[best].cap)) best = i;
    if (best < 0) {
        *cap = size;
        return malloc(size ? size : 1);
    }
    void *data = pool[best].data;
    *cap = pool[best].cap;
    pooled_bytes -= pool[best].cap;
    pool[best] = pool[--pooled];
    return data;
}

static void pool_give(void *data, size_t cap) {
    if (!data) return;
    if (!pool_closed && pooled < POOL_SLOTS && pooled_bytes + cap <= POOL_MAX_BYTES) {
        pool[pooled].data = data;
        pool[pooled].cap = cap;
        pooled++;
        pooled_bytes += cap;
    } else {
        free(data);
    }
}

/* Frees every pooled buffer, and those let go of from now on until the next pool_take(): once a
   file is read, its buffers that are still alive are freed as the rest of the import drops them. */
static void pool_trim(void) {
    while (pooled) free(pool[--pooled].data);
    pooled_bytes = 0;
    pool_closed = 1;
}

typedef struct {
    PyObject_HEAD void *data;
    Py_ssize_t size;
    size_t cap;
} BufferObject;

static void buffer_dealloc(BufferObject *self) {
    pool_give(self->data, self->cap);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int buffer_get(BufferObject *self, Py_buffer *view, int flags) {
    static char empty[1];
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data ? self->data : empty, self->size, 1, flags);
}

static PyBufferProcs buffer_procs = {(getbufferproc)buffer_get, NULL};

static PyTypeObject BufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = BUFFER_TYPE_NAME,
    .tp_basicsize = sizeof(BufferObject),
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_as_buffer = &buffer_procs,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = BUFFER_DOC,
};

/* A new Buffer owning `data` (from pool_take or malloc, `size` bytes used of `cap`); the caller no
   longer owns it either way (on failure it goes back to the pool). */
static PyObject *hand_over(void *data, size_t size, size_t cap) {
    BufferObject *b = PyObject_New(BufferObject, &BufferType);
    if (!b) {
        pool_give(data, cap);
        return NULL;
    }
    b->data = data;
    b->size = (Py_ssize_t)size;
    b->cap = cap;
    return (PyObject *)b;
}

#endif
