/* chain.seal (adapters/chain.py) in one call: hash a line into the session's chain and
 * append its chain field. The same bytes and digest as the Python function; SHA-256 is
 * OpenSSL's (libcrypto, as hashlib's), so it runs on the CPU's SHA instructions where they
 * exist, without hashlib's per-call hash object.
 *
 * Optional, and separate from _speedups because it needs OpenSSL's headers to build:
 * without them chain.py hashes through hashlib (docs/architecture.md).
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED  /* SHA256_Init & co.: one hash on the stack, no allocation */
#include <Python.h>
#include <openssl/sha.h>

static const char HEAD[] = ",\"chain\":\"";  /* the chain field, after the line's last value */
static const char TAIL[] = "\"}";
static const char HEX[] = "0123456789abcdef";

/* seal(canonical, previous) -> (line, digest): bytes-like arguments, bytes results */
static PyObject *
seal(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "seal(canonical: bytes, previous: bytes)");
        return NULL;
    }
    Py_buffer canonical, previous;
    if (PyObject_GetBuffer(args[0], &canonical, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &previous, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&canonical);
        return NULL;
    }
    PyObject *result = NULL;
    const char *line = canonical.buf;
    Py_ssize_t n = canonical.len;
    if (n < 3 || line[n - 1] != '}') {
        PyObject *start = PyBytes_FromStringAndSize(line, n < 40 ? n : 40);
        if (start != NULL) {
            PyErr_Format(PyExc_ValueError, "cannot chain %R: not a non-empty JSON object", start);
            Py_DECREF(start);
        }
        goto done;
    }
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, previous.buf, (size_t)previous.len);
    SHA256_Update(&ctx, line, (size_t)n);
    SHA256_Final(digest, &ctx);

    Py_ssize_t head = (Py_ssize_t)sizeof(HEAD) - 1, tail = (Py_ssize_t)sizeof(TAIL) - 1;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n - 1 + head + 2 * SHA256_DIGEST_LENGTH + tail);
    if (out == NULL)
        goto done;
    char *p = PyBytes_AS_STRING(out);
    memcpy(p, line, (size_t)(n - 1));
    p += n - 1;
    memcpy(p, HEAD, (size_t)head);
    p += head;
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        *p++ = HEX[digest[i] >> 4];
        *p++ = HEX[digest[i] & 15];
    }
    memcpy(p, TAIL, (size_t)tail);
    PyObject *raw = PyBytes_FromStringAndSize((const char *)digest, SHA256_DIGEST_LENGTH);
    if (raw != NULL)
        result = PyTuple_Pack(2, out, raw);
    Py_DECREF(out);
    Py_XDECREF(raw);
done:
    PyBuffer_Release(&previous);
    PyBuffer_Release(&canonical);
    return result;
}

static PyMethodDef methods[] = {
    {"seal", (PyCFunction)(void (*)(void))seal, METH_FASTCALL,
     PyDoc_STR("seal(canonical, previous) -> (line, digest): chain.seal, compiled")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sessiontree.adapters._chainseal",
    .m_doc = PyDoc_STR("chain.seal with OpenSSL's SHA-256 (optional)."),
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__chainseal(void)
{
    return PyModule_Create(&module);
}
