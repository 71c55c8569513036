"""Normalising: a function body rewritten into the small core language (A-normal form) that
the reverse transform knows. ``normalizer.normalize_function`` is the entry; the
``Normalizer`` rewrites each statement and expression kind with a method of one of its
mixins, one module per family of forms:

=====================================================  =======================================
form                                                   becomes (module)
=====================================================  =======================================
assignment, unpacking, ``a op= b`` (in place or not),  one operation per statement
``del``, ``return``, ``raise``, ``assert``,            (``statements``); ``global`` names are
``global``, ``nonlocal``, ``class`` inside, ``async``  read and written in the module's
(refused)                                              namespace (``rewrites``)
``if``, conditional expressions, ``and`` / ``or``      ``if`` statements (``statements``,
                                                       ``expressions``)
``for``, ``while``, ``break``, ``continue``, loop      ``for`` / ``while True`` with flags
``else``, early ``return``                             (``loops``)
``try``, ``with``, ``match``                           ``try`` / ``with`` / tests and bindings
                                                       (``exceptions``)
nested ``def``, ``lambda``, comprehensions,            nested defs and loops (``functions``);
generator expressions, generators                      a generator's yields collected in a
                                                       list (``rewrites``)
calls, attributes, subscripts, slices, displays,       operations on names and constants
f-strings, ``:=``, comparisons                         (``expressions``)
=====================================================  =======================================

``core`` holds what every form uses: ``Namer``, ``IRFunction`` and the tables of builtins
(non-differentiable, pure, iterated live).
"""
