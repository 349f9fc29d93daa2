"""Registries of named, pluggable classes (interpretation methods, and the scorers and
attribution methods of the studies to come), all under one set of rules.

    METHODS = Registry('interpretation method')
    class Method(METHODS.Registered): name = None ...      # abstract: no name
    class Gradient(Method): name = 'gradient'; description = 'one line'

A class that sets `name` registers itself when it is defined. Rules, checked then: a name
without commas or surrounding spaces, not taken (a ValueError naming the class that has
it), and a one-line `description`, from which --help is built (`describe`). A Registry
is a dict name -> class in the order the classes were defined.
"""
from nlp_utils import UserError


class Registry(dict):
    """name -> registered class, for one `kind` of class (what messages call them)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        registry = self

        class Registered:
            """Base of the registry's classes: a subclass with a `name` registers itself."""
            name = None            # the class's name in the registry, on command lines
            description = None     # one line, shown in --help

            def __init_subclass__(cls, **kwargs):
                super().__init_subclass__(**kwargs)
                if cls.__dict__.get('name') is not None:
                    registry.register(cls)
        self.Registered = Registered

    def register(self, cls):
        """Add `cls` under cls.name, after checking the rules (module docstring)."""
        name = cls.name
        if not isinstance(name, str) or not name or name != name.strip() or ',' in name:
            raise ValueError('{} needs a {} name without commas or surrounding spaces, got '
                             '{!r}'.format(cls.__qualname__, self.kind, name))
        if not isinstance(cls.description, str) or not cls.description.strip() \
                or '\n' in cls.description:
            raise ValueError('{} {!r} ({}) needs a one-line description'.format(
                self.kind, name, cls.__qualname__))
        if name in self:
            raise ValueError('{} {!r} is already registered by {}.{}; choose another '
                             'name'.format(self.kind, name, self[name].__module__,
                                           self[name].__qualname__))
        self[name] = cls
        return cls

    def parse(self, names, argument):
        """'a,b' or a list -> tuple of distinct registered names, in the order given; a
        UserError naming `argument` when one is unknown or none is given."""
        names = names.split(',') if isinstance(names, str) else list(names)
        names = [name.strip() for name in names if name.strip()]
        unknown = [name for name in names if name not in self]
        if unknown or not names:
            raise UserError('{}: {}; choose from {}'.format(
                argument, 'unknown {}(s) {}'.format(self.kind, ', '.join(unknown)) if unknown
                else 'no {} given'.format(self.kind), ', '.join(self)))
        return tuple(dict.fromkeys(names))

    def describe(self):
        """'name: description; ...' over the registry, for --help."""
        return '; '.join('{}: {}'.format(name, cls.description) for name, cls in self.items())
