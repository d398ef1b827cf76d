/* kafkalog._native: module init. Each C file contributes one method table (native.h). */
#include "native.h"

PyObject *kl_Invalid = NULL;

void
kl_set_invalid(Py_ssize_t index, Py_ssize_t pos)
{
    PyObject *where = Py_BuildValue("nn", index, pos);
    if (where != NULL) {
        PyErr_SetObject(kl_Invalid, where);
        Py_DECREF(where);
    }
}

int
kl_get_buffer(PyObject *obj, Py_buffer *view)
{
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE);
}

int
kl_get_writable(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t n, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected %zd-byte items, got %zd", name, itemsize, view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->len / itemsize < n) {
        PyErr_Format(PyExc_ValueError, "%s: room for %zd items, need %zd", name, view->len / itemsize, n);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyMethodDef *const tables[] = {
    kl_walk_methods,
    kl_md5_methods,
    kl_cleaner_methods,
    kl_crc32c_methods,
    kl_append_methods,
    kl_recover_methods,
    kl_decode_methods,
    kl_legacy_methods,
};

static int
native_exec(PyObject *m)
{
    kl_Invalid = PyErr_NewExceptionWithDoc(
        "kafkalog._native.Invalid",
        "Malformed input: the compiled core gives up and the pure-Python core raises the error.",
        PyExc_ValueError, NULL);
    if (kl_Invalid == NULL || PyModule_AddObjectRef(m, "Invalid", kl_Invalid) < 0)
        return -1;
    kl_crc32c_init();
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
        if (PyModule_AddFunctions(m, tables[i]) < 0)
            return -1;
#ifdef KAFKALOG_SANITIZE
    if (PyModule_AddIntConstant(m, "SANITIZED", 1) < 0)
        return -1;
#else
    if (PyModule_AddIntConstant(m, "SANITIZED", 0) < 0)
        return -1;
#endif
    return 0;
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, native_exec},
    {0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "kafkalog._native",
    "kafkalog's compiled record core (the pure-Python modules are its reference twin).",
    0, NULL, slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    return PyModuleDef_Init(&moduledef);
}
