/* The compiled form of the generated encoders (adapters/fastcodec.py).
 *
 * An Encoder turns one attrs value (an entry, a message, a block, a usage or a cost) into
 * the dict of its wire object, following a plan that fastcodec derives from the same
 * metadata as its generated Python encoders: the keys in order, where each value comes
 * from, which keys are left out when None, and what to do with unknown fields. It does
 * exactly what the generated Python function of the same plan does (tests compare both
 * with the cattrs reference); it only skips the interpreter. Anything unusual (a value
 * with no encoder of its own, a dialect's number layout, a re-ordering) is handed to the
 * Python callables the plan names, so this file holds no format rules of its own. A plan
 * is made once per class and reads attrs slots where the class has them: a domain class
 * patched afterwards (a property put over a field) is not seen by its compiled encoder.
 *
 * It also holds append_if_at, the common case of a JSONL append (adapters/jsonl_file.py)
 * as one call: lock, check, write, unlock, with the interpreter's lock released once.
 *
 * Optional: without a C compiler the package installs without it and fastcodec uses the
 * generated Python encoders, jsonl_file its own calls (docs/architecture.md).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>  /* T_OBJECT_EX, READ_RESTRICTED */

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

enum {
    OP_CONST = 0,          /* a constant (a tag) */
    OP_ATTR = 1,           /* an attribute, as it is */
    OP_ATTR_CALL = 2,      /* fn(attribute) (a dialect's number or value layout) */
    OP_NESTED = 3,         /* the attribute's own encoder */
    OP_NESTED_OPT = 4,     /* None, or OP_NESTED */
    OP_LIST_NESTED = 5,    /* [its encoder(x) for x in attribute] */
    OP_STR_OR_LIST = 6,    /* a str as it is, else OP_LIST_NESTED */
    OP_LIST_NESTED_OPT = 7,/* None, or OP_LIST_NESTED */
    OP_LIST = 8,           /* list(attribute) */
    OP_GENERIC = 9,        /* fallback(attribute) */
    OP_ATTR_FLOAT = 10,    /* OP_ATTR_CALL, but a plain float (see below) is written as it is */
    OP_ATTR_VALUE = 11,    /* OP_ATTR_CALL, but a value holding no float that is not plain is too */
    OP_LAST = 11
};

/* OP_ATTR_FLOAT and OP_ATTR_VALUE: the plan's converter leaves a value as it is unless it is
 * (or, for a free-form value, holds at any depth in dicts, lists and tuples) a float f, of
 * exactly that type, with f != 0 and not lo <= |f| < hi; the dialect declares lo and hi
 * (Dialect.plain_floats) and a test checks its writers against them. So the converter is
 * called only for values it changes, as the Python plan calls it for every value. */

typedef struct {
    PyObject *key;  /* the wire key */
    PyObject *arg;  /* OP_CONST: the value; otherwise the attribute name */
    PyObject *fn;   /* OP_ATTR_CALL: the converter; otherwise NULL */
    Py_ssize_t offset;  /* the attribute's slot in a value of exactly the plan's class, or 0 */
    double lo, hi;      /* OP_ATTR_FLOAT, OP_ATTR_VALUE: the plain floats */
    int op;
    int early;          /* computed in the first pass (see encode) */
} Item;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *template;      /* a dict of every key (values None): copied, it is presized */
    PyTypeObject *cls;       /* the class the plan is for */
    Py_ssize_t extra_offset; /* the slot of its ``extra``, or 0 */
    PyObject *name;          /* the class name, for repr */
    Py_ssize_t *first;       /* the indexes of the items computed first, in that order */
    Py_ssize_t n_first;
    Item *items;
    Py_ssize_t n_items;
    PyObject *omit;          /* tuple: keys deleted when their value is None */
    PyObject *fields;        /* frozenset: the wire keys of fields (absent fields are among them) */
    PyObject *items_writer;  /* None, or what extra goes through before it is merged */
    PyObject *reorder;       /* None, or called on the dict when extra is not empty */
    PyObject *reorder_arg;   /* None: reorder(value, out); else reorder(reorder_arg, out) */
    PyObject *encoders;      /* dict: class -> encoder (shared by a codec's encoders) */
    PyObject *fallback;      /* called for a value whose class has no encoder */
} Encoder;

static PyTypeObject EncoderType;
static PyObject *str_absent;
static PyObject *str_extra;
static PyObject *str_update;

#if PY_VERSION_HEX >= 0x030D0000
#define lookup_attr PyObject_GetOptionalAttr
#else
#define lookup_attr _PyObject_LookupAttr
#endif

static PyObject *encode(Encoder *self, PyObject *o);

/* The offset of attribute ``name`` of ``cls`` when it is a plain object slot (what an attrs
 * class with slots has) and the class looks attributes up the generic way; 0 otherwise,
 * -1 with an exception set on an error other than AttributeError. Reading the slot directly
 * is what the interpreter's own specialised attribute load does; it is used only for values
 * of exactly ``cls`` (a subclass may define the name otherwise) and any surprise (an empty
 * slot) goes through getattr. */
static Py_ssize_t
slot_offset(PyTypeObject *cls, PyObject *name)
{
    if (cls->tp_getattro != PyObject_GenericGetAttr)
        return 0;  /* a __getattribute__ or __getattr__ of its own: always ask it */
    PyObject *d = PyObject_GetAttr((PyObject *)cls, name);
    if (d == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t offset = 0;
    if (Py_TYPE(d) == &PyMemberDescr_Type && PyType_IsSubtype(cls, PyDescr_TYPE(d))) {
        PyMemberDef *member = ((PyMemberDescrObject *)d)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READ_RESTRICTED) && member->offset > 0)
            offset = member->offset;
    }
    Py_DECREF(d);
    return offset;
}

/* getattr(o, name), through the slot when the plan knows it (a new reference). */
static inline PyObject *
get_attr(Encoder *self, PyObject *o, PyObject *name, Py_ssize_t offset)
{
    if (offset && Py_TYPE(o) == self->cls) {
        PyObject *v = *(PyObject **)((char *)o + offset);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(o, name);  /* also raises the AttributeError of an empty slot */
}

/* (encoders.get(v.__class__) or fallback)(v) */
static PyObject *
dispatch(Encoder *self, PyObject *v)
{
    PyObject *enc = PyDict_GetItemWithError(self->encoders, (PyObject *)Py_TYPE(v));
    if (enc == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_CallOneArg(self->fallback, v);
    }
    Py_INCREF(enc);  /* what runs below may remove or replace it in the dict */
    PyObject *out;
    if (Py_TYPE(enc) == &EncoderType && ((Encoder *)enc)->template != NULL)
        out = encode((Encoder *)enc, v);
    else
        out = PyObject_CallOneArg(enc, v);
    Py_DECREF(enc);
    return out;
}

/* [dispatch(x) for x in v] */
static PyObject *
list_nested(Encoder *self, PyObject *v)
{
    PyObject *seq = PyTuple_CheckExact(v) ? Py_NewRef(v) : PySequence_Tuple(v);
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = dispatch(self, PyTuple_GET_ITEM(seq, i));
        if (item == NULL) {
            Py_DECREF(seq);
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, item);
    }
    Py_DECREF(seq);
    return out;
}

static inline int
float_is_plain(PyObject *v, double lo, double hi)
{
    double f = PyFloat_AS_DOUBLE(v);
    double a = fabs(f);
    return f == 0.0 || (lo <= a && a < hi);
}

/* Does a free-form value hold a float that is not plain (1), or not (0); -1 on error? */
static int
holds_unplain_float(PyObject *v, double lo, double hi)
{
    if (PyFloat_CheckExact(v))
        return !float_is_plain(v, lo, hi);
    int dict = PyDict_CheckExact(v);
    if (!dict && !PyList_CheckExact(v) && !PyTuple_CheckExact(v))
        return 0;
    if (Py_EnterRecursiveCall(" while looking at a free-form value"))
        return -1;
    int found = 0;
    if (dict) {
        Py_ssize_t pos = 0;
        PyObject *key, *item;
        while (!found && PyDict_Next(v, &pos, &key, &item)) {
            Py_INCREF(item);
            found = holds_unplain_float(item, lo, hi);
            Py_DECREF(item);
        }
    }
    else {
        PyObject *seq = PyList_CheckExact(v) ? PyList_AsTuple(v) : Py_NewRef(v);
        if (seq == NULL)
            found = -1;
        else {
            for (Py_ssize_t i = 0; !found && i < PyTuple_GET_SIZE(seq); i++)
                found = holds_unplain_float(PyTuple_GET_ITEM(seq, i), lo, hi);
            Py_DECREF(seq);
        }
    }
    Py_LeaveRecursiveCall();
    return found;
}

/* The value of one item (a new reference), or NULL with an exception set. */
static PyObject *
item_value(Encoder *self, Item *item, PyObject *o)
{
    if (item->op == OP_CONST)
        return Py_NewRef(item->arg);
    PyObject *v = get_attr(self, o, item->arg, item->offset);
    if (v == NULL)
        return NULL;
    PyObject *out;
    switch (item->op) {
    case OP_ATTR:
        return v;
    case OP_ATTR_CALL:
        out = PyObject_CallOneArg(item->fn, v);
        break;
    case OP_ATTR_FLOAT:
        if (!PyFloat_CheckExact(v) || float_is_plain(v, item->lo, item->hi))
            return v;
        out = PyObject_CallOneArg(item->fn, v);
        break;
    case OP_ATTR_VALUE: {
        int unplain = holds_unplain_float(v, item->lo, item->hi);
        if (unplain == 0)
            return v;
        out = unplain < 0 ? NULL : PyObject_CallOneArg(item->fn, v);
        break;
    }
    case OP_NESTED:
        out = dispatch(self, v);
        break;
    case OP_NESTED_OPT:
        out = v == Py_None ? Py_NewRef(Py_None) : dispatch(self, v);
        break;
    case OP_LIST_NESTED:
        out = list_nested(self, v);
        break;
    case OP_STR_OR_LIST:
        out = PyUnicode_Check(v) ? Py_NewRef(v) : list_nested(self, v);
        break;
    case OP_LIST_NESTED_OPT:
        out = v == Py_None ? Py_NewRef(Py_None) : list_nested(self, v);
        break;
    case OP_LIST:
        out = PySequence_List(v);
        break;
    default: /* OP_GENERIC */
        out = PyObject_CallOneArg(self->fallback, v);
        break;
    }
    Py_DECREF(v);
    return out;
}

/* out.update(extra) */
static int
merge(PyObject *out, PyObject *extra)
{
    if (PyDict_Check(extra))
        return PyDict_Update(out, extra);
    PyObject *r = PyObject_CallMethodOneArg(out, str_update, extra);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* The slot of ``absent`` in the classes of ``extra`` met that are not plain dicts (decoded
 * values use a few: messages.SharedExtra, pi's PiExtra), so the attribute is read without
 * a lookup. A fixed set of entries, each filled once; the classes are kept alive. */
#define ABSENT_TYPES 4
static PyTypeObject *absent_types[ABSENT_TYPES];
static Py_ssize_t absent_offsets[ABSENT_TYPES];

/* Delete from out the keys that extra marks absent (fields the producer left out). */
static int
drop_absent(Encoder *self, PyObject *out, PyObject *extra)
{
    PyObject *absent = NULL;
    PyTypeObject *type = Py_TYPE(extra);
    Py_ssize_t offset = -1;  /* -1: not known */
    for (int i = 0; i < ABSENT_TYPES && absent_types[i] != NULL; i++) {
        if (absent_types[i] == type) {
            offset = absent_offsets[i];
            break;
        }
    }
    if (offset < 0) {
        offset = slot_offset(type, str_absent);  /* may run Python: the table is filled after */
        if (offset < 0)
            return -1;
        for (int i = 0; i < ABSENT_TYPES; i++) {
            if (absent_types[i] == type)
                break;
            if (absent_types[i] == NULL) {
                absent_offsets[i] = offset;
                absent_types[i] = (PyTypeObject *)Py_NewRef(type);
                break;
            }
        }
    }
    if (offset)
        absent = *(PyObject **)((char *)extra + offset);
    if (absent != NULL)
        Py_INCREF(absent);
    else if (lookup_attr(extra, str_absent, &absent) < 0)
        return -1;
    if (absent == NULL)
        return 0;
    int truth = PyObject_IsTrue(absent);
    if (truth <= 0) {
        Py_DECREF(absent);
        return truth;
    }
    PyObject *it = PyObject_GetIter(absent);
    Py_DECREF(absent);
    if (it == NULL)
        return -1;
    PyObject *key;
    while ((key = PyIter_Next(it)) != NULL) {
        int found = PySet_Contains(self->fields, key);
        if (found > 0)
            found = PyDict_Contains(out, key);
        if (found > 0)
            found = PyDict_DelItem(out, key) < 0 ? -1 : 0;
        Py_DECREF(key);
        if (found < 0) {
            Py_DECREF(it);
            return -1;
        }
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static PyObject *
encode(Encoder *self, PyObject *o)
{
    if (Py_EnterRecursiveCall(" while encoding a session value"))
        return NULL;
    PyObject *out = PyDict_Copy(self->template);  /* every key in place: no resizing */
    PyObject *extra = NULL;
    if (out == NULL)
        goto error;
    /* In the generated function's order: the nested values first, in field order, then
     * the others in key order; every key is in the template already, so the dict keeps the
     * key order whatever order its values are set in. */
    for (int pass = 0; pass < 2; pass++) {
        Py_ssize_t n = pass ? self->n_items : self->n_first;
        for (Py_ssize_t k = 0; k < n; k++) {
            Py_ssize_t i = pass ? k : self->first[k];
            Item *item = &self->items[i];
            if (pass && item->early)
                continue;
            PyObject *v = item_value(self, item, o);
            if (v == NULL)
                goto error;
            int r = PyDict_SetItem(out, item->key, v);
            Py_DECREF(v);
            if (r < 0)
                goto error;
        }
    }
    Py_ssize_t n_omit = PyTuple_GET_SIZE(self->omit);
    for (Py_ssize_t i = 0; i < n_omit; i++) {
        PyObject *key = PyTuple_GET_ITEM(self->omit, i);
        PyObject *v = PyDict_GetItemWithError(out, key);
        if (v == NULL) {
            if (PyErr_Occurred())
                goto error;
            PyErr_SetObject(PyExc_KeyError, key);  /* as out[key] would */
            goto error;
        }
        if (v == Py_None && PyDict_DelItem(out, key) < 0)
            goto error;
    }
    extra = get_attr(self, o, str_extra, self->extra_offset);
    if (extra == NULL)
        goto error;
    if (Py_TYPE(extra) != &PyDict_Type && drop_absent(self, out, extra) < 0)
        goto error;
    int truth = PyObject_IsTrue(extra);
    if (truth < 0)
        goto error;
    if (truth) {
        if (self->items_writer != Py_None) {
            PyObject *written = PyObject_CallOneArg(self->items_writer, extra);
            if (written == NULL)
                goto error;
            Py_SETREF(extra, written);
        }
        if (merge(out, extra) < 0)
            goto error;
        if (self->reorder != Py_None) {
            PyObject *first = self->reorder_arg == Py_None ? o : self->reorder_arg;
            PyObject *ordered = PyObject_CallFunctionObjArgs(self->reorder, first, out, NULL);
            if (ordered == NULL)
                goto error;
            Py_SETREF(out, ordered);
        }
    }
    Py_DECREF(extra);
    Py_LeaveRecursiveCall();
    return out;
error:
    Py_XDECREF(extra);
    Py_XDECREF(out);
    Py_LeaveRecursiveCall();
    return NULL;
}

static PyObject *
Encoder_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "an encoder takes one positional argument");
        return NULL;
    }
    return encode((Encoder *)self, args[0]);
}

static void
clear_items(Encoder *self)
{
    if (self->items == NULL)
        return;
    for (Py_ssize_t i = 0; i < self->n_items; i++) {
        Py_XDECREF(self->items[i].key);
        Py_XDECREF(self->items[i].arg);
        Py_XDECREF(self->items[i].fn);
    }
    PyMem_Free(self->items);
    self->items = NULL;
    self->n_items = 0;
    PyMem_Free(self->first);
    self->first = NULL;
    self->n_first = 0;
}

static int
Encoder_traverse(Encoder *self, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < self->n_items; i++) {
        Py_VISIT(self->items[i].key);
        Py_VISIT(self->items[i].arg);
        Py_VISIT(self->items[i].fn);
    }
    Py_VISIT(self->template);
    Py_VISIT(self->cls);
    Py_VISIT(self->name);
    Py_VISIT(self->omit);
    Py_VISIT(self->fields);
    Py_VISIT(self->items_writer);
    Py_VISIT(self->reorder);
    Py_VISIT(self->reorder_arg);
    Py_VISIT(self->encoders);
    Py_VISIT(self->fallback);
    return 0;
}

static int
Encoder_clear(Encoder *self)
{
    clear_items(self);
    Py_CLEAR(self->template);
    Py_CLEAR(self->cls);
    Py_CLEAR(self->name);
    Py_CLEAR(self->omit);
    Py_CLEAR(self->fields);
    Py_CLEAR(self->items_writer);
    Py_CLEAR(self->reorder);
    Py_CLEAR(self->reorder_arg);
    Py_CLEAR(self->encoders);
    Py_CLEAR(self->fallback);
    return 0;
}

static void
Encoder_dealloc(Encoder *self)
{
    PyObject_GC_UnTrack(self);
    Encoder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Encoder(cls, name, items, first, omit, fields, items_writer, reorder, reorder_arg, encoders, fallback)
 * items: a sequence of (key, op, arg, fn) in key order (see the OP_ constants); first: a
 * tuple of the indexes of the items to compute before the others, in that order. */
static int
Encoder_init(Encoder *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"cls", "name", "items", "first", "omit", "fields", "items_writer", "reorder",
                            "reorder_arg", "encoders", "fallback", NULL};
    PyObject *cls, *name, *items, *first, *omit, *fields, *items_writer, *reorder, *reorder_arg, *encoders, *fallback;
    if (self->template != NULL) {  /* a running encode may be using the plan */
        PyErr_SetString(PyExc_TypeError, "an encoder's plan cannot be replaced");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!UOO!O!O!OOOO!O:Encoder", names, &PyType_Type, &cls, &name,
                                     &items, &PyTuple_Type, &first, &PyTuple_Type, &omit, &PyFrozenSet_Type,
                                     &fields, &items_writer, &reorder, &reorder_arg, &PyDict_Type, &encoders,
                                     &fallback))
        return -1;
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return -1;
    }
    PyObject *seq = PySequence_Tuple(items);
    if (seq == NULL)
        return -1;
    PyObject *template = PyDict_New();
    if (template == NULL) {
        Py_DECREF(seq);
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq), n_first = 0;
    Py_ssize_t *first_idx = NULL;
    Item *parsed = PyMem_Calloc(n ? n : 1, sizeof(Item));
    if (parsed == NULL) {
        Py_DECREF(seq);
        Py_DECREF(template);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key, *arg, *fn;
        int op;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(seq, i), "UiOO:Encoder item", &key, &op, &arg, &fn))
            goto fail;
        if (op < 0 || op > OP_LAST) {
            PyErr_Format(PyExc_ValueError, "unknown encoder operation %d", op);
            goto fail;
        }
        if (op != OP_CONST && !PyUnicode_Check(arg)) {
            PyErr_SetString(PyExc_TypeError, "an attribute name must be a str");
            goto fail;
        }
        double lo = 0.0, hi = 0.0;
        if (op == OP_ATTR_FLOAT || op == OP_ATTR_VALUE) {  /* fn: (converter, lo, hi) */
            if (!PyArg_ParseTuple(fn, "Odd:Encoder plain floats", &fn, &lo, &hi))
                goto fail;
        }
        if ((op == OP_ATTR_CALL || op == OP_ATTR_FLOAT || op == OP_ATTR_VALUE) && !PyCallable_Check(fn)) {
            PyErr_SetString(PyExc_TypeError, "a converter must be callable");
            goto fail;
        }
        if (PyDict_SetItem(template, key, Py_None) < 0)
            goto fail;
        parsed[i].key = Py_NewRef(key);
        parsed[i].arg = Py_NewRef(arg);
        if (op != OP_CONST)
            PyUnicode_InternInPlace(&parsed[i].arg);
        parsed[i].fn = op == OP_ATTR_CALL || op == OP_ATTR_FLOAT || op == OP_ATTR_VALUE ? Py_NewRef(fn) : NULL;
        parsed[i].lo = lo;
        parsed[i].hi = hi;
        parsed[i].offset = op == OP_CONST ? 0 : slot_offset((PyTypeObject *)cls, parsed[i].arg);
        parsed[i].op = op;
        if (parsed[i].offset < 0)
            goto fail;
    }
    n_first = PyTuple_GET_SIZE(first);
    first_idx = PyMem_Calloc(n_first ? n_first : 1, sizeof(Py_ssize_t));
    if (first_idx == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n_first; k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(first, k));
        if (i == -1 && PyErr_Occurred())
            goto fail;
        if (i < 0 || i >= n || parsed[i].early) {
            PyErr_SetString(PyExc_ValueError, "first: item indexes, each once");
            goto fail;
        }
        parsed[i].early = 1;
        first_idx[k] = i;
    }
    Py_ssize_t extra_offset = slot_offset((PyTypeObject *)cls, str_extra);
    if (extra_offset < 0)
        goto fail;
    if (self->template != NULL) {  /* planned meanwhile (slot_offset may run Python) */
        PyErr_SetString(PyExc_TypeError, "an encoder's plan cannot be replaced");
        goto fail;
    }
    Py_DECREF(seq);
    Encoder_clear(self);
    self->vectorcall = Encoder_vectorcall;
    self->template = template;
    self->first = first_idx;
    self->n_first = n_first;
    self->cls = (PyTypeObject *)Py_NewRef(cls);
    self->extra_offset = extra_offset;
    self->items = parsed;
    self->n_items = n;
    self->name = Py_NewRef(name);
    self->omit = Py_NewRef(omit);
    self->fields = Py_NewRef(fields);
    self->items_writer = Py_NewRef(items_writer);
    self->reorder = Py_NewRef(reorder);
    self->reorder_arg = Py_NewRef(reorder_arg);
    self->encoders = Py_NewRef(encoders);
    self->fallback = Py_NewRef(fallback);
    return 0;
fail:
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_XDECREF(parsed[i].key);
        Py_XDECREF(parsed[i].arg);
        Py_XDECREF(parsed[i].fn);
    }
    PyMem_Free(parsed);
    PyMem_Free(first_idx);
    Py_DECREF(seq);
    Py_DECREF(template);
    return -1;
}

static PyObject *
Encoder_repr(Encoder *self)
{
    return PyUnicode_FromFormat("<sessiontree compiled encoder %S>", self->name ? self->name : Py_None);
}

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sessiontree.adapters._speedups.Encoder",
    .tp_doc = PyDoc_STR("The dict of a value's wire object, by a plan from fastcodec."),
    .tp_basicsize = sizeof(Encoder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(Encoder, vectorcall),
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Encoder_init,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_traverse = (traverseproc)Encoder_traverse,
    .tp_clear = (inquiry)Encoder_clear,
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)Encoder_repr,
};

/* append_if_at(fd, lines, end, fsync, dev, ino) -> int
 *
 * Under an exclusive flock taken without waiting: if the file ends at byte ``end``, write
 * ``lines`` (a list of bytes, each without its newline) each followed by a newline, in one
 * writev (looping over short writes), fsync if asked, and return the number of bytes
 * written. Return 0, having written nothing, when the lock is held elsewhere, the file
 * does not end at ``end``, or the lines are not a few plain bytes objects: the caller
 * takes its general path (wait for the lock, catch up). On a failed write or fsync, or a
 * signal handler raising once the interpreter runs again (a KeyboardInterrupt during a
 * long fsync), the file is cut back to ``end`` and the error is raised, as the Python path
 * does. The lock is released before returning in every case. ``dev`` and ``ino`` identify
 * the file (its fstat when it was opened): a handler may close it and open another file
 * under the same descriptor number, which is then left alone. */
#define MAX_LINES 64  /* more lines than this in one append take the general path */

static PyObject *
append_if_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 6 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "append_if_at(fd: int, lines: list[bytes], end: int, fsync: bool, dev: int, ino: int)");
        return NULL;
    }
    unsigned long long dev = PyLong_AsUnsignedLongLong(args[4]);
    if (dev == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    unsigned long long ino = PyLong_AsUnsignedLongLong(args[5]);
    if (ino == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    long fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "append_if_at: not a file descriptor");
        return NULL;
    }
    long long end = PyLong_AsLongLong(args[2]);
    if (end == -1 && PyErr_Occurred())
        return NULL;
    if (end < 0) {
        PyErr_SetString(PyExc_ValueError, "append_if_at: a negative file size");
        return NULL;
    }
    int do_fsync = PyObject_IsTrue(args[3]);
    if (do_fsync < 0)
        return NULL;
    PyObject *lines = args[1];
    Py_ssize_t count = PyList_GET_SIZE(lines);
    if (count == 0 || count > MAX_LINES)
        return PyLong_FromLong(0);
    struct iovec iov[2 * MAX_LINES];
    PyObject *held[MAX_LINES];  /* the lines stay alive while the interpreter's lock is released */
    static char newline = '\n';
    size_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *line = PyList_GET_ITEM(lines, i);
        if (!PyBytes_CheckExact(line)) {  /* another bytes-like object: the general path */
            for (Py_ssize_t j = 0; j < i; j++)
                Py_DECREF(held[j]);
            return PyLong_FromLong(0);
        }
        held[i] = Py_NewRef(line);
        iov[2 * i].iov_base = PyBytes_AS_STRING(line);
        iov[2 * i].iov_len = (size_t)PyBytes_GET_SIZE(line);
        iov[2 * i + 1].iov_base = &newline;
        iov[2 * i + 1].iov_len = 1;
        total += (size_t)PyBytes_GET_SIZE(line) + 1;
    }
    int locked = 0, result = 0, saved = 0;  /* result: 1 written, 0 general path, -1 failed (errno saved) */
    Py_BEGIN_ALLOW_THREADS
    if (flock((int)fd, LOCK_EX | LOCK_NB) == 0) {
        locked = 1;
        off_t at = lseek((int)fd, 0, SEEK_END);
        if (at < 0) {
            saved = errno;
            result = -1;
        }
        else if (at == (off_t)end) {
            struct iovec *v = iov;
            int left = (int)(2 * count);
            result = 1;
            while (left > 0) {
                ssize_t n = writev((int)fd, v, left);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0) {
                    saved = n < 0 ? errno : EIO;
                    result = -1;
                    break;
                }
                while (left > 0 && (size_t)n >= v->iov_len) {  /* skip what was written */
                    n -= (ssize_t)v->iov_len;
                    v++;
                    left--;
                }
                if (left > 0) {
                    v->iov_base = (char *)v->iov_base + n;
                    v->iov_len -= (size_t)n;
                }
            }
            if (result == 1 && do_fsync && fsync((int)fd) != 0) {
                saved = errno;
                result = -1;
            }
        }
    }
    else if (errno != EWOULDBLOCK && errno != EINTR) {
        saved = errno;
        result = -1;
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++)
        Py_DECREF(held[i]);
    if (result < 0)
        errno = saved;
    /* A signal that came during the calls: its handler runs now; if it raises, this append
     * fails as a failed write does (the Python path's except BaseException). */
    int interrupted = result >= 0 && PyErr_CheckSignals() < 0;
    if (locked && interrupted) {  /* the handler may have closed the file and opened another */
        struct stat st;
        locked = fstat((int)fd, &st) == 0 && (unsigned long long)st.st_dev == dev
                 && (unsigned long long)st.st_ino == ino;
    }
    if (locked) {
        if (result < 0 || (result == 1 && interrupted)) {
            while (ftruncate((int)fd, (off_t)end) != 0 && errno == EINTR)
                ;
        }
        flock((int)fd, LOCK_UN);
    }
    if (interrupted)
        return NULL;
    if (result < 0) {
        errno = saved;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSize_t(result ? total : 0);
}

static PyMethodDef methods[] = {
    {"append_if_at", (PyCFunction)(void (*)(void))append_if_at, METH_FASTCALL,
     PyDoc_STR("append_if_at(fd, lines, end, fsync, dev, ino) -> bytes written, or 0: take the general path")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "sessiontree.adapters._speedups",
    .m_doc = PyDoc_STR("Compiled encoders for sessiontree's generated codec, and its JSONL append (optional)."),
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    str_absent = PyUnicode_InternFromString("absent");
    str_extra = PyUnicode_InternFromString("extra");
    str_update = PyUnicode_InternFromString("update");
    if (str_absent == NULL || str_extra == NULL || str_update == NULL)
        return NULL;
    if (PyType_Ready(&EncoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&EncoderType);
    if (PyModule_AddObject(m, "Encoder", (PyObject *)&EncoderType) < 0) {
        Py_DECREF(&EncoderType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "OP_CONST", OP_CONST) < 0
        || PyModule_AddIntConstant(m, "OP_ATTR", OP_ATTR) < 0
        || PyModule_AddIntConstant(m, "OP_ATTR_CALL", OP_ATTR_CALL) < 0
        || PyModule_AddIntConstant(m, "OP_NESTED", OP_NESTED) < 0
        || PyModule_AddIntConstant(m, "OP_NESTED_OPT", OP_NESTED_OPT) < 0
        || PyModule_AddIntConstant(m, "OP_LIST_NESTED", OP_LIST_NESTED) < 0
        || PyModule_AddIntConstant(m, "OP_STR_OR_LIST", OP_STR_OR_LIST) < 0
        || PyModule_AddIntConstant(m, "OP_LIST_NESTED_OPT", OP_LIST_NESTED_OPT) < 0
        || PyModule_AddIntConstant(m, "OP_LIST", OP_LIST) < 0
        || PyModule_AddIntConstant(m, "OP_GENERIC", OP_GENERIC) < 0
        || PyModule_AddIntConstant(m, "OP_ATTR_FLOAT", OP_ATTR_FLOAT) < 0
        || PyModule_AddIntConstant(m, "OP_ATTR_VALUE", OP_ATTR_VALUE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
