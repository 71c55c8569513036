"""The reverse transform: the core language (A-normal form, from ``normalize``) to the
plus-function's AST. :class:`~.builder.FunctionBuilder` walks a function's blocks; the way
each construct is reversed is one mixin per family of constructs, in its own module.

Where each construct of the supported language (SPEC section 7) is reversed. *normalised*
means that ``normalize`` rewrites it into constructs of the core language, so it has no
reverse of its own.

=====================================================  ==========================================
construct                                              reversed in
=====================================================  ==========================================
assignment, augmented assignment, ``:=``               ``segments`` (a statement of a segment:
                                                       ``SegmentRules.segment``), ``statements``
                                                       (``StatementRules.general_stmt``)
tuple / starred unpacking                              ``statements`` (``unpack_reverse``,
                                                       ``unpack_back``)
arithmetic, comparisons, ``not``, calls of rules       ``calls`` (``CallRules.call_like``,
                                                       ``binop``); on floats ``fast_paths``
calls with ``*`` / ``**``, keyword arguments           ``calls`` (``call_like``)
nested ``def``, ``lambda``, closures, ``nonlocal``     ``calls`` (``CallRules.closure_stmt``: a
                                                       builder of its own per nested function)
subscripts, slices, attributes, ``del``                ``containers`` (``sequence_read``,
                                                       ``list_write``, ``delete_stmt``)
list / tuple / set / dict displays                     ``containers`` (``display``,
                                                       ``native_display``)
``if`` / ``elif`` / ``else``                           ``builder`` (``FunctionBuilder.c_If``)
conditional expressions, ``and`` / ``or``              normalised to ``if``
``for`` (any iterable), ``else`` on loops              ``loops`` (``LoopRules.c_For``);
                                                       fast variants in ``fast_loops``,
                                                       ``list_loops``
``while``                                              ``loops`` (``LoopRules.c_While``)
``break``, ``continue``, early ``return``              normalised to flags
comprehensions, generator expressions                  normalised to loops
generators (``yield``, ``yield from``)                 normalised: the yields collected in a list
``try`` / ``except`` / ``finally``, ``raise``,         ``exceptions`` (``ExceptionRules.c_Try``)
``assert``
``with``                                               ``exceptions`` (``ExceptionRules.c_With``)
``match``                                              ``exceptions`` (``ExceptionRules.c_Match``)
``global`` writes, ``class`` inside, f-strings         normalised (module namespace dict, calls)
recursion, methods of user classes                     ``calls`` (a call like any other)
=====================================================  ==========================================

The specialisations are kept apart from these rules and must equal them
(``transformer.general_paths_only()`` builds code without any of them):
``fast_paths`` (float fast segments under a type guard, the fused gradient ``f__grad``),
``replay`` (a general segment's reverse as a replay program), ``fast_loops`` (a loop
running its fast segment while the guard holds), ``list_loops`` (loops over lists of
numbers, run over the lists themselves); ``fused``
(one level up: ``f__grad`` for vector parameters) and ``peephole`` run on the result.

The other modules: ``builder`` (the walk: records, blocks, ``if``), ``entry`` (the
plus-function's ``def`` around the reversed body), ``syntax`` (operator tables, the prefix of generated names, AST node
constructors), ``templates`` (inline rules parsed once into templates), ``ssa`` (a segment in
single-assignment form and the accumulator of its adjoints), ``segments`` (how statements are
classified and grouped into segments).
"""
