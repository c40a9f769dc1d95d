"""Several files of one run migrated as one program.

Modules: `index` (what each file defines, imports and calls), `calls` (what a migrated
caller passes), `stub` (the callers written below the engine), `decide` (the rounds).

A set-up file (`train.py`) prepares the model, optimizer and loaders and hands them to a
function of another file of the run (`engine.train_fn(loader, model, optimizer, device,
scheduler)`), whose body holds the backward, the clipping and the metrics. Alone, the
set-up is prepared and the engine is left as written with AM913/AM914 findings. Here the
two are migrated together, whole or not at all:

- `index()` reads every file of the run once with `ast` (cheap, no LibCST): the imports
  that reach another file of the run (`import engine`, `import engine as e`,
  `from engine import train_fn as tf`, `from . import engine`, packages, and the
  `from .loop import *` of a package re-exporting a module's functions) and the calls they
  make, and each file's top-level functions.
- A function is *threaded* (it gets a keyword-only `accelerator` parameter) when it
  trains or evaluates (a `.backward(`, or a loop in it), is called from another file of
  the run, is never used there as a value, and can take the keyword (no `**kwargs`, no
  `accelerator` parameter yet, defined once). A class that trains with what it is given
  (`Trainer(model, optimizer, loader)`, its own `__init__`, no subclass, not built on a
  class of another file of the project) is threaded the same way: `__init__` takes the keyword and stores `self.accelerator` (AM002's classes).
- The callers are migrated with `Config.project_calls` naming the call spellings that
  pass `accelerator=...` (AM914 writes it where an Accelerator reaches the call, and
  reports it where none does).
- The engine file is migrated with the rules of a single script, with its callers written
  as a stub appended below the module (`Config.project_callers`): a function that makes
  the Accelerator, prepares the parameters the real callers pass prepared, and calls the
  threaded functions. The rules then see exactly what they see when caller and engine
  share a file (AM002 threads the parameter, the loader is known to be prepared, the
  verifier checks the result); the stub is cut off again before anything is shown or
  written, and findings on its lines are dropped. Appended below, it moves no line of the
  real code.
- Whole or nothing: a call site that ends up without `accelerator=`, a function the engine
  migration did not thread, a parameter prepared at one call and not at another, or a
  result that failed or was refused drops the function, and the run is redone without it
  until nothing is dropped. A file with nothing threaded is migrated as it is alone.
"""


from migrator.project.batch_params import batch_params
from migrator.project.dir_makers import dir_maker_calls
from migrator.project.dist_helpers import distribution_calls
from migrator.project.downloads import download_calls, download_draw_calls
from migrator.project.drives import driving_calls
from migrator.project.entries import called_elsewhere, entered_calls, entering_calls, launched
from migrator.project.decide import (
    Outcome, decide, evaluation_calls, loader_calls, placing_calls, refused_alone, refused_trainers, state_calls, trainers_called,
    with_reasons, with_unthreaded,
)
from migrator.project.index import Call, FileIndex, Function, candidates, index, inheriting_calls, installed_packages, linked, member_calls, subclassed_elsewhere
from migrator.project.iterators import iterator_params
from migrator.project.main_flags import main_flags
from migrator.project.freezers import freezer_calls
from migrator.project.hand_wrapped import hand_wrapped_attributes, wrapping_calls
from migrator.project.handed_loggers import handed_loggers
from migrator.project.open_files import file_keeper_calls
from migrator.project.splits import seeded_by_callers, split_helper_calls
from migrator.project.unpassed import unpassed_params
from migrator.project.loggers import logger_calls
from migrator.project.module_readers import module_reader_calls
from migrator.project.meters import meter_calls
from migrator.project.model_readers import model_attribute_readers
from migrator.project.param_roles import role_calls
from migrator.project.print_silencers import print_silencer_calls
from migrator.project.savers import saver_calls
from migrator.project.sharded_loaders import gathering_reader_calls, sharded_loader_calls, sharded_params, sharding_reader_calls
from migrator.project.stub import SEPARATOR, STUB, with_stub, without_stub
from migrator.project.unused import unused_models
from migrator.project.whole import evaluations_left_whole, without_share_findings
from migrator.project.output_writers import output_writer_calls
from migrator.project.wrapped_loaders import wrapped_loader_facts
from migrator.project.writers import writer_calls, writers_callers_gate

__all__ = [
    "Call", "FileIndex", "Function", "Outcome", "SEPARATOR", "STUB",
    "batch_params", "called_elsewhere", "candidates", "decide", "dir_maker_calls", "distribution_calls", "download_calls", "download_draw_calls", "driving_calls", "entered_calls", "evaluation_calls", "entering_calls", "evaluations_left_whole", "file_keeper_calls", "freezer_calls", "gathering_reader_calls", "hand_wrapped_attributes", "handed_loggers", "index", "inheriting_calls", "installed_packages", "iterator_params", "launched", "linked", "loader_calls", "logger_calls", "main_flags", "member_calls", "meter_calls", "model_attribute_readers", "output_writer_calls", "module_reader_calls", "placing_calls", "print_silencer_calls", "refused_alone", "refused_trainers", "role_calls", "saver_calls", "seeded_by_callers", "sharded_loader_calls", "sharded_params", "sharding_reader_calls", "split_helper_calls", "state_calls", "subclassed_elsewhere", "trainers_called", "unpassed_params", "unused_models", "with_reasons", "with_stub", "with_unthreaded", "without_share_findings", "without_stub", "wrapped_loader_facts", "wrapping_calls", "writer_calls", "writers_callers_gate",
]
