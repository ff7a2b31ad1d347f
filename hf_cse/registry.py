"""Name registries for the interchangeable parts of a run, and the decorators that fill them.

Every objective, loss form, auxiliary loss, view augmentation, input provider, pooler and evaluator is registered under
a name, and is built by that name from the training arguments (``objective="dclr"``, ``loss_form="focal"``, ...; a
pooler from ``PoolingConfig.pooler``, which ``config.json`` stores; an evaluator from an ``evaluators`` spec). A user's
own part registers the same way from any module; once that module is imported (``run_unsup.py --import_module
my_objectives``), the name works everywhere a built-in one does::

    from hf_cse import ContrastiveObjective, register_objective
    from hf_cse.objectives.simcse import InfoNCEForm

    @register_objective("my_infonce")
    class MyInfoNCE(ContrastiveObjective):
        def __init__(self, temperature: float = 0.05) -> None:
            super().__init__(InfoNCEForm(temperature))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from .errors import UsageError, echo

T = TypeVar("T")


class Registry(Mapping[str, type[T]], Generic[T]):
    """A read-only mapping ``name -> class`` filled by :meth:`register`.

    Args:
        kind: what one entry is, for messages (``"objective"``).
        plural: the plural, for messages (``"objectives"``).
    """

    def __init__(self, kind: str, plural: str) -> None:
        self.kind, self.plural = kind, plural
        self._classes: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: register the class as ``name`` and set its ``name`` attribute.

        Registering a second class under a taken name is an error (a re-import of the same class is not).
        """
        if not isinstance(name, str) or not name.isidentifier():
            raise UsageError(f"A {self.kind} name must be a Python identifier, got {name!r}.")

        def decorate(cls: type[T]) -> type[T]:
            taken = self._classes.get(name)
            # The same class imported again (a reloaded module) may re-register; another class may not.
            if taken is not None and (taken.__module__, taken.__qualname__) != (cls.__module__, cls.__qualname__):
                raise UsageError(
                    f"The {self.kind} name {name!r} is taken by {taken.__module__}.{taken.__qualname__}; "
                    "register yours under another name."
                )
            cls.name = name
            self._classes[name] = cls
            return cls

        return decorate

    def check(self, name: str) -> str:
        """``name`` if it is registered; otherwise a one-line error listing the registered names (for a value that
        is no name at all, an instance of a part say, naming its type: its repr may run over many lines)."""
        valid = f"valid {self.plural} are: {', '.join(sorted(self))}"
        if not isinstance(name, str):
            raise UsageError(f"Expected a registered {self.kind}'s name, got a {type(name).__name__} object; {valid}.")
        if name not in self._classes:
            raise UsageError(f"Unknown {self.kind} {echo(name)}; {valid}.")
        return name

    def build(self, name: str, **hparams: Any) -> T:
        """An instance of the class registered as ``name``, built with ``hparams``.

        Raises:
            UsageError: an unknown name (the message lists the registered ones) or a hyper-parameter the class does
                not take (the message lists those it takes).
        """
        cls = self._classes[self.check(name)]
        variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]  # without self
        accepted = [p.name for p in parameters if p.kind not in variadic]
        unknown = sorted(set(hparams) - set(accepted))
        if unknown:
            raise UsageError(
                f"{self.kind.capitalize()} {name!r} got unknown hyper-parameters {unknown}; it accepts: {accepted}."
            )
        return cls(**hparams)

    def __getitem__(self, name: str) -> type[T]:
        return self._classes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._classes)})"


OBJECTIVES: Registry[Any] = Registry("objective", "objectives")
"""Contrastive objectives (:class:`~hf_cse.objectives.base.ContrastiveObjective`), by ``args.objective``."""
LOSS_FORMS: Registry[Any] = Registry("loss form", "loss forms")
"""Loss forms (:class:`~hf_cse.objectives.base.LossForm`), by an objective's ``loss_form`` (e.g. DCLR's)."""
AUXILIARY_LOSSES: Registry[Any] = Registry("auxiliary loss", "auxiliary losses")
"""Weighted extra terms (:class:`~hf_cse.objectives.auxiliary.AuxiliaryLoss`), by ``args.auxiliary_losses`` keys."""
VIEW_AUGMENTATIONS: Registry[Any] = Registry("view augmentation", "view augmentations")
"""Positive-view makers (:class:`~hf_cse.augment.views.ViewAugmentation`), by ``args.view_augmentation``."""
INPUT_PROVIDERS: Registry[Any] = Registry("input provider", "input providers")
"""Extra step inputs (:class:`~hf_cse.inputs.base.InputProvider`), by the names objectives and terms require."""
POOLERS: Registry[Any] = Registry("pooler", "poolers")
"""Sentence poolers (:class:`~hf_cse.modeling.poolers.base.Pooler`), by ``PoolingConfig.pooler`` (``--pooler``), in
registration order; the name is what ``config.json`` stores."""
EVALUATORS: Registry[Any] = Registry("evaluator", "evaluators")
"""What evaluations score (:class:`~hf_cse.evaluation.evaluators.base.Evaluator`), by the ``KIND`` of an
``args.evaluators`` spec (``--evaluators sts pairs:FILE``), in registration order, which messages list."""

register_objective = OBJECTIVES.register
register_loss_form = LOSS_FORMS.register
register_auxiliary_loss = AUXILIARY_LOSSES.register
register_view_augmentation = VIEW_AUGMENTATIONS.register
register_input_provider = INPUT_PROVIDERS.register
register_pooler = POOLERS.register
register_evaluator = EVALUATORS.register
