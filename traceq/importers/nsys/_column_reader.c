/*
 * traceq.importers.nsys._column_reader: the integer columns of an SQLite query, stepped straight into Arrow buffers.
 *
 * Connection(uri, functions) opens an nsys export read-only (SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
 * with the caller's `file:...?mode=ro&immutable=1` URI); read(sql) runs one query whose result
 * columns all hold integers or NULLs and writes, per column:
 *
 *   int64 values (0 where NULL) + an Arrow validity bitmap (bit set = not null, only where the
 *   column has a NULL) + its null count
 *
 * The buffers are handed to Python without a copy (Buffer objects, read through the buffer
 * protocol).  Stepping and decoding run without the GIL, so that a few threads, each with its own
 * Connection, read chunks of a table on separate cores; a Connection refuses a second thread while
 * it reads, so SQLite's per-connection mutex is not needed (SQLITE_OPEN_NOMUTEX).  Each row's values
 * are found once per row rather than once per value (see locate()).
 *
 * A value that is REAL, TEXT or a BLOB is never converted: read() *declines* (returns the reason as
 * a string) and the caller reads that query through another backend.  A failure of SQLite itself
 * raises SQLiteError with sqlite3_errmsg's text.
 *
 * No SQLite header or library is needed to build this file: the few functions it calls are declared
 * here, and their addresses come from Python at run time (`functions`, in the order of FUNCTIONS),
 * taken with ctypes from the library that Python's own sqlite3 module uses.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_TYPE_NAME "traceq.importers.nsys._column_reader.Buffer"
#define BUFFER_DOC "Memory written by Connection.read(), read through the buffer protocol (read-only)."
#include "_buffers.h"

/* ------------------------------------------------------------------------------------------ */
/* the part of the sqlite3 C API used here (https://sqlite.org/c3ref/intro.html) */

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
typedef struct sqlite3_value sqlite3_value;

#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_INTEGER 1
#define SQLITE_FLOAT 2
#define SQLITE_TEXT 3
#define SQLITE_BLOB 4
#define SQLITE_NULL 5
#define SQLITE_OPEN_READONLY 0x00000001
#define SQLITE_OPEN_URI 0x00000040
#define SQLITE_OPEN_NOMUTEX 0x00008000

_Static_assert(sizeof(long long) == 8, "sqlite3_int64 is a 64-bit long long");

typedef struct {
    int (*open_v2)(const char *filename, sqlite3 **db, int flags, const char *vfs);
    int (*close)(sqlite3 *db);
    int (*prepare_v2)(sqlite3 *db, const char *sql, int bytes, sqlite3_stmt **stmt, const char **tail);
    int (*step)(sqlite3_stmt *stmt);
    int (*column_count)(sqlite3_stmt *stmt);
    sqlite3_value *(*column_value)(sqlite3_stmt *stmt, int column);
    int (*value_type)(sqlite3_value *value);
    long long (*value_int64)(sqlite3_value *value);
    const char *(*column_name)(sqlite3_stmt *stmt, int column);
    int (*finalize)(sqlite3_stmt *stmt);
    const char *(*errmsg)(sqlite3 *db);
} Api;

/* The names whose addresses Connection() takes, in the order of Api's members. */
static const char *const api_names[] = {"sqlite3_open_v2",      "sqlite3_close",       "sqlite3_prepare_v2",
                                        "sqlite3_step",         "sqlite3_column_count", "sqlite3_column_value",
                                        "sqlite3_value_type",   "sqlite3_value_int64", "sqlite3_column_name",
                                        "sqlite3_finalize",     "sqlite3_errmsg"};
#define API_FUNCTIONS ((Py_ssize_t)(sizeof api_names / sizeof api_names[0]))
_Static_assert(sizeof(Api) == sizeof(void (*)(void)) * sizeof api_names / sizeof api_names[0],
               "one address per Api member");

static PyObject *SQLiteError;

/* Raises SQLiteError with SQLite's message (decoded leniently: it may quote bytes from the file). */
static void set_sqlite_error(const char *message) {
    PyObject *text = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message), "replace");
    if (!text) return;
    PyErr_SetObject(SQLiteError, text);
    Py_DECREF(text);
}

/* ------------------------------------------------------------------------------------------ */
/* one query's columns */

typedef struct {
    int64_t *values;
    unsigned char *valid; /* NULL until the column's first NULL: then all bits set, nulls cleared */
    size_t nulls;
    size_t values_cap, valid_cap; /* bytes allocated */
} Column;

typedef struct {
    Column *columns;
    int ncolumns;
    size_t rows, cap;
    int declined, no_memory, sqlite_failed;
    char message[512];
} Read;

/* Gives back what was not handed over (with the GIL held: the pool is shared). */
static void release(Read *r) {
    for (int c = 0; c < r->ncolumns; c++) {
        pool_give(r->columns[c].values, r->columns[c].values_cap);
        pool_give(r->columns[c].valid, r->columns[c].valid_cap);
    }
    free(r->columns);
}

static size_t bitmap_bytes(size_t rows) { return (rows + 7) / 8; }

/* Room for `cap` rows in every column, from the pool (with the GIL held: the first allocation). */
static int reserve(Read *r, size_t cap) {
    if (cap > SIZE_MAX / sizeof(int64_t)) return 0;
    for (int c = 0; c < r->ncolumns; c++) {
        Column *col = &r->columns[c];
        col->values = pool_take(cap * sizeof(int64_t), &col->values_cap);
        if (!col->values) return 0;
    }
    r->cap = cap;
    return 1;
}

/* Room for `cap` rows in every column, growing past the first allocation (no GIL needed: realloc). */
static int resize(Read *r, size_t cap) {
    if (cap > SIZE_MAX / sizeof(int64_t)) return 0;
    for (int c = 0; c < r->ncolumns; c++) {
        Column *col = &r->columns[c];
        if (col->values_cap < cap * sizeof(int64_t)) {
            int64_t *values = realloc(col->values, cap * sizeof *values);
            if (!values) return 0;
            col->values = values;
            col->values_cap = cap * sizeof *values;
        }
        if (col->valid && col->valid_cap < bitmap_bytes(cap)) {
            unsigned char *valid = realloc(col->valid, bitmap_bytes(cap));
            if (!valid) return 0;
            memset(valid + bitmap_bytes(r->cap), 0xFF, bitmap_bytes(cap) - bitmap_bytes(r->cap));
            col->valid = valid;
            col->valid_cap = bitmap_bytes(cap);
        }
    }
    r->cap = cap;
    return 1;
}

static int mark_null(Read *r, Column *col, size_t row) {
    if (!col->valid) {
        /* every bit set, rows past `row` included, so that growing only needs to set the new bytes */
        col->valid = malloc(bitmap_bytes(r->cap) ? bitmap_bytes(r->cap) : 1);
        if (!col->valid) return 0;
        col->valid_cap = bitmap_bytes(r->cap) ? bitmap_bytes(r->cap) : 1;
        memset(col->valid, 0xFF, bitmap_bytes(r->cap));
    }
    col->valid[row >> 3] &= (unsigned char)~(1u << (row & 7));
    col->values[row] = 0;
    col->nulls++;
    return 1;
}

static const char *type_name(int type) {
    switch (type) {
    case SQLITE_FLOAT: return "REAL";
    case SQLITE_TEXT: return "TEXT";
    case SQLITE_BLOB: return "BLOB";
    default: return "unknown";
    }
}

/* Where the current row's values are.  sqlite3_column_value(stmt, c) is the c-th element of the
   statement's array of result registers, which stays in place from row to row; so one call per row
   (column 0) tells whether the row is where the last one was, and the others are found by the
   stride between elements, measured -- and checked for every column -- whenever the row moves.  Where
   the check fails, every value is asked for with its own call (`stride` 0).  Calling
   sqlite3_column_type and sqlite3_column_int64 for every value (each checks the statement, the
   column index and the mutex) costs about as much as stepping through the rows itself. */
typedef struct {
    char *base;
    ptrdiff_t stride;
} Row;

static void locate(const Api *api, sqlite3_stmt *stmt, int ncolumns, Row *row) {
    char *first = (char *)api->column_value(stmt, 0);
    if (first == row->base) return;
    row->base = first;
    row->stride = ncolumns > 1 ? (char *)api->column_value(stmt, 1) - first : 1;
    for (int c = 1; c < ncolumns && row->stride; c++)
        if ((char *)api->column_value(stmt, c) != first + c * row->stride) row->stride = 0;
}

/* Steps `stmt` to its end into r's columns; touches no Python object (runs without the GIL).  The
   values are read as SQLite's own sqlite3_column_int64 reads them (sqlite3_value_int64 of the result
   register); the connection is used by this thread alone, so no mutex is needed around them. */
static void step_all(const Api *api, sqlite3 *db, sqlite3_stmt *stmt, Read *r) {
    Row at = {NULL, 0};
    for (;;) {
        int rc = api->step(stmt);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            r->sqlite_failed = 1;
            snprintf(r->message, sizeof r->message, "%s", api->errmsg(db));
            return;
        }
        if (r->rows == r->cap && !resize(r, r->cap * 2)) {
            r->no_memory = 1;
            return;
        }
        size_t row = r->rows;
        locate(api, stmt, r->ncolumns, &at);
        for (int c = 0; c < r->ncolumns; c++) {
            Column *col = &r->columns[c];
            sqlite3_value *value =
                at.stride ? (sqlite3_value *)(at.base + c * at.stride) : api->column_value(stmt, c);
            int type = api->value_type(value);
            if (type == SQLITE_INTEGER) {
                col->values[row] = (int64_t)api->value_int64(value);
            } else if (type == SQLITE_NULL) {
                if (!mark_null(r, col, row)) {
                    r->no_memory = 1;
                    return;
                }
            } else {
                const char *name = api->column_name(stmt, c);
                r->declined = 1;
                snprintf(r->message, sizeof r->message, "column %d (%s) holds a %s value (row %zu of the result)", c,
                         name ? name : "?", type_name(type), row);
                return;
            }
        }
        r->rows++;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Connection */

typedef struct {
    PyObject_HEAD Api api;
    sqlite3 *db;
    int busy; /* a read() is running (without the GIL) */
} ConnectionObject;

static int close_db(ConnectionObject *self) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the connection is reading on another thread");
        return 0;
    }
    if (self->db) {
        sqlite3 *db = self->db;
        self->db = NULL;
        Py_BEGIN_ALLOW_THREADS
        self->api.close(db);
        Py_END_ALLOW_THREADS
    }
    return 1;
}

static void connection_dealloc(ConnectionObject *self) {
    if (self->db) self->api.close(self->db); /* busy is impossible: read() holds a reference */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int connection_init(ConnectionObject *self, PyObject *args, PyObject *kwargs) {
    const char *uri;
    PyObject *functions;
    static char *keywords[] = {"uri", "functions", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "sO:Connection", keywords, &uri, &functions)) return -1;
    if (self->db || self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the connection is already open");
        return -1;
    }
    PyObject *seq = PySequence_Fast(functions, "functions must be a sequence of addresses");
    if (!seq) return -1;
    if (PySequence_Fast_GET_SIZE(seq) != API_FUNCTIONS) {
        PyErr_Format(PyExc_ValueError, "functions must hold %zd addresses (see FUNCTIONS)", API_FUNCTIONS);
        Py_DECREF(seq);
        return -1;
    }
    void (*pointers[sizeof api_names / sizeof api_names[0]])(void);
    for (Py_ssize_t i = 0; i < API_FUNCTIONS; i++) {
        unsigned long long address = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (address == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (!address) {
            PyErr_Format(PyExc_ValueError, "no address for %s", api_names[i]);
            Py_DECREF(seq);
            return -1;
        }
        pointers[i] = (void (*)(void))(uintptr_t)address;
    }
    Py_DECREF(seq);
    memcpy(&self->api, pointers, sizeof self->api);

    sqlite3 *db = NULL;
    int rc;
    /* NOMUTEX: a connection is used by one thread at a time (`busy` makes sure), so SQLite need not
       take its mutex on every step and column access */
    Py_BEGIN_ALLOW_THREADS
    rc = self->api.open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    Py_END_ALLOW_THREADS
    if (rc != SQLITE_OK) {
        set_sqlite_error(db ? self->api.errmsg(db) : "out of memory");
        if (db) self->api.close(db);
        return -1;
    }
    self->db = db;
    return 0;
}

static PyObject *columns_result(Read *r) {
    PyObject *columns = PyList_New(r->ncolumns);
    if (!columns) return NULL;
    for (int c = 0; c < r->ncolumns; c++) {
        Column *col = &r->columns[c];
        PyObject *values = hand_over(col->values, r->rows * sizeof(int64_t), col->values_cap);
        col->values = NULL;
        PyObject *valid = col->nulls ? hand_over(col->valid, bitmap_bytes(r->rows), col->valid_cap) : Py_NewRef(Py_None);
        if (col->nulls) col->valid = NULL;
        if (!values || !valid) {
            Py_XDECREF(values);
            Py_XDECREF(valid);
            Py_DECREF(columns);
            return NULL;
        }
        PyObject *item = Py_BuildValue("(NNn)", values, valid, (Py_ssize_t)col->nulls); /* N: taken even on failure */
        if (!item) {
            Py_DECREF(columns);
            return NULL;
        }
        PyList_SET_ITEM(columns, c, item);
    }
    return Py_BuildValue("(nN)", (Py_ssize_t)r->rows, columns);
}

PyDoc_STRVAR(read_doc,
             "read(sql, rows_hint=0, /) -> (rows, [(values, validity | None, null_count), ...]) | str\n\n"
             "Run `sql` and return each result column as int64 values and an Arrow validity bitmap (None\n"
             "where the column has no NULL).  `rows_hint` is the size of the first allocation (it grows by\n"
             "doubling).  Returns a decline reason (str) at the first value that is not an integer or NULL;\n"
             "raises SQLiteError when SQLite fails.");

static PyObject *connection_read(ConnectionObject *self, PyObject *args) {
    const char *sql;
    Py_ssize_t rows_hint = 0;
    if (!PyArg_ParseTuple(args, "s|n:read", &sql, &rows_hint)) return NULL;
    if (!self->db) {
        PyErr_SetString(PyExc_ValueError, "the connection is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the connection is reading on another thread");
        return NULL;
    }
    self->busy = 1;
    Read r;
    memset(&r, 0, sizeof r);
    sqlite3_stmt *stmt = NULL;
    int prepared, ncolumns = 0;
    Py_BEGIN_ALLOW_THREADS
    prepared = self->api.prepare_v2(self->db, sql, -1, &stmt, NULL) == SQLITE_OK;
    if (!prepared) {
        r.sqlite_failed = 1;
        snprintf(r.message, sizeof r.message, "%s", self->api.errmsg(self->db));
    } else if (stmt) { /* NULL for a statement of only whitespace or comments: no columns, no rows */
        ncolumns = self->api.column_count(stmt);
    }
    Py_END_ALLOW_THREADS
    if (stmt) {
        /* the first allocation comes from the pool, which needs the GIL */
        r.ncolumns = ncolumns;
        r.columns = calloc(ncolumns ? (size_t)ncolumns : 1, sizeof *r.columns);
        if (!r.columns) {
            r.ncolumns = 0;
            r.no_memory = 1;
        } else if (!reserve(&r, rows_hint > 0 ? (size_t)rows_hint : 4096)) {
            r.no_memory = 1;
        }
        Py_BEGIN_ALLOW_THREADS
        if (!r.no_memory) step_all(&self->api, self->db, stmt, &r);
        self->api.finalize(stmt);
        Py_END_ALLOW_THREADS
    }
    self->busy = 0;
    PyObject *out = NULL;
    if (r.no_memory)
        PyErr_NoMemory();
    else if (r.sqlite_failed)
        set_sqlite_error(r.message);
    else if (r.declined)
        out = PyUnicode_FromString(r.message);
    else
        out = columns_result(&r);
    release(&r);
    return out;
}

PyDoc_STRVAR(close_doc, "close() -> None\n\nClose the database (closing twice is harmless).");

static PyObject *connection_close(ConnectionObject *self, PyObject *unused) {
    (void)unused;
    if (!close_db(self)) return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(trim_doc, "trim() -> None\n\nFree the buffers kept for the next read (call once an export is read).");

static PyObject *trim(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    pool_trim();
    Py_RETURN_NONE;
}

static PyMethodDef connection_methods[] = {{"read", (PyCFunction)connection_read, METH_VARARGS, read_doc},
                                           {"close", (PyCFunction)connection_close, METH_NOARGS, close_doc},
                                           {NULL, NULL, 0, NULL}};

PyDoc_STRVAR(connection_doc,
             "Connection(uri, functions)\n\n"
             "One read-only connection to the SQLite file at `uri` (a file: URI), for one thread at a time.\n"
             "`functions` holds the addresses of the SQLite functions named in FUNCTIONS, in that order.");

static PyTypeObject ConnectionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "traceq.importers.nsys._column_reader.Connection",
    .tp_basicsize = sizeof(ConnectionObject),
    .tp_dealloc = (destructor)connection_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = connection_doc,
    .tp_methods = connection_methods,
    .tp_init = (initproc)connection_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------------------------------ */
/* module */

static PyMethodDef module_methods[] = {{"trim", trim, METH_NOARGS, trim_doc}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_column_reader",
                                    "Integer columns of an SQLite query read into Arrow buffers (see Connection).",
                                    -1, module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__column_reader(void) {
    if (PyType_Ready(&BufferType) < 0 || PyType_Ready(&ConnectionType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *names = PyTuple_New(API_FUNCTIONS);
    if (!names) goto fail;
    for (Py_ssize_t i = 0; i < API_FUNCTIONS; i++) {
        PyObject *name = PyUnicode_FromString(api_names[i]);
        if (!name) {
            Py_DECREF(names);
            goto fail;
        }
        PyTuple_SET_ITEM(names, i, name);
    }
    if (PyModule_AddObject(m, "FUNCTIONS", names) < 0) {
        Py_DECREF(names);
        goto fail;
    }
    SQLiteError = PyErr_NewExceptionWithDoc("traceq.importers.nsys._column_reader.SQLiteError",
                                            "SQLite failed; the message is sqlite3_errmsg's.", NULL, NULL);
    if (!SQLiteError || PyModule_AddObjectRef(m, "SQLiteError", SQLiteError) < 0) goto fail;
    if (PyModule_AddObjectRef(m, "Connection", (PyObject *)&ConnectionType) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
